import Dispatch
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The delegate of every session Catena makes: routes each task's callbacks to its
/// call by task identifier.
///
/// On Linux only a *session-level* delegate hears about body chunks and bytes sent (a
/// task-level delegate receives none of those callbacks, measured), and a task-level
/// delegate makes corelibs abort the process when a task is cancelled while a redirect
/// decision is pending. All of a session's callbacks arrive on its one serial queue.
final class URLSessionRouter: NSObject, URLSessionDataDelegate, Sendable {
    private let calls = Locked<[Int: URLSessionCall]>([:])
    private let callQueue = DispatchQueue(label: "Catena URLSession calls")

    /// Runs `work` (making, starting or cancelling tasks) on the session's serial call
    /// queue. corelibs does each of those inside the session's work queue, which one
    /// libcurl call can hold for seconds: a 2 MiB gzip bomb is inflated to 2 GiB in a
    /// single call, before anything can stop it. Cancelled on the delegate queue, a
    /// task held up every callback of the session meanwhile while the inflated chunks
    /// piled up behind it (2.2 GiB and 9.8 s against a 64 MiB limit and a 3 s timeout;
    /// answered first and cancelled here, 0.2 s); started or cancelled on a caller's
    /// thread, it blocked the cooperative pool. One serial queue, so at most one
    /// thread waits.
    func onCallQueue(_ work: @escaping @Sendable () -> Void) {
        callQueue.async(execute: work)
    }

    /// Cancels `task` on the call queue, without waiting.
    func cancel(_ task: URLSessionTask) {
        callQueue.async { task.cancel() }
    }

    func register(_ call: URLSessionCall, for task: URLSessionTask) {
        calls.withLock { $0[task.taskIdentifier] = call }
    }

    func unregister(_ task: URLSessionTask) {
        _ = calls.withLock { $0.removeValue(forKey: task.taskIdentifier) }
    }

    private func call(_ task: URLSessionTask) -> URLSessionCall? {
        calls.withLock { $0[task.taskIdentifier] }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64, totalBytesExpectedToSend: Int64) {
        call(task)?.sent(totalBytesSent, of: totalBytesExpectedToSend)
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        completionHandler(call(dataTask)?.received(response) ?? .cancel)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        call(dataTask)?.received(data)
    }

    /// Never followed here: the 3xx becomes the task's response, and Catena follows it
    /// (``Redirects``), with the same rules as on every other transport.
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        // A cancelled call leaves corelibs' handler unanswered: answering it after the
        // cancellation is what aborts the process.
        guard call(task)?.redirecting() ?? true else { return }
        completionHandler(nil)
    }

    /// A 401 or 407 with a challenge is a response like any other. corelibs delivers the
    /// head and body before the challenge and then waits for it to be answered (a call
    /// without an answer hung until its timeout, measured): cancelling the challenge ends
    /// the task, and the call returns what it already received.
    func urlSession(
        _ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        #if canImport(FoundationNetworking)
        call(task)?.challenged()
        completionHandler(.cancelAuthenticationChallenge, nil)
        #else
        // Apple's URLSession hands over the 401 itself when no credential is offered,
        // and evaluates server trust as usual.
        completionHandler(.performDefaultHandling, nil)
        #endif
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let call = calls.withLock { $0.removeValue(forKey: task.taskIdentifier) }
        call?.completed(error, response: task.response as? HTTPURLResponse)
    }
}
