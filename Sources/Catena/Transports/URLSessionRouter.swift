import Dispatch
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The delegate of every session Catena makes: routes each task's callbacks to its
/// call by task identifier.
///
/// On Linux only a *session-level* delegate hears about body chunks and bytes sent,
/// and a task-level delegate makes corelibs abort the process when a task is cancelled
/// while a redirect decision is pending. All of a session's callbacks arrive on its one
/// serial queue.
final class URLSessionRouter: NSObject, URLSessionDataDelegate, Sendable {
    private let calls = Locked<[Int: URLSessionCall]>([:])
    private let callQueue = DispatchQueue(label: "Catena URLSession calls")
    /// The deadlines of this session's calls, on one timer.
    let deadlines = Deadlines()
    /// Catena's tasks in this process, from their start until corelibs reports them
    /// complete (a cancelled bomb's libcurl call included) or their body of declared
    /// length, nothing to inflate, has all arrived; and a start on a caller's thread
    /// while it runs. Every session's work queue runs on one serial queue of corelibs'.
    private static let tasksInFlight = Locked(0)

    /// Runs `work` (making and starting a task) on the session's serial call queue, or
    /// on the caller's thread when no task of Catena's is in flight in the process.
    ///
    /// corelibs makes, starts and cancels a task inside its work queue, which one
    /// libcurl call can hold for seconds (it inflates a compressed body in one go): so
    /// never on the delegate queue, whose callbacks would stall, nor on the cooperative
    /// pool, but on one serial queue, where at most one thread waits. With nothing of
    /// ours in flight there is nothing of ours to wait behind, and the hop is skipped.
    func start(_ work: @escaping @Sendable () -> Void) {
        // Counted in before it runs, so that no task of ours can start meanwhile and hold
        // the work queue this thread is about to wait in.
        let here = Self.tasksInFlight.withLock { count in
            guard count == 0 else { return false }
            count += 1
            return true
        }
        guard here else { return callQueue.async(execute: work) }
        work()
        Self.tasksInFlight.withLock { $0 -= 1 }
    }

    /// Cancels `task` on the call queue, without waiting.
    func cancel(_ task: URLSessionTask) {
        callQueue.async { task.cancel() }
    }

    func register(_ call: URLSessionCall, for task: URLSessionTask) {
        calls.withLock { $0[task.taskIdentifier] = call }
        Self.tasksInFlight.withLock { $0 += 1 }
    }

    func unregister(_ task: URLSessionTask) {
        _ = remove(task)
    }

    /// Removes `task`'s call, if it is still there, and counts the task out.
    private func remove(_ task: URLSessionTask) -> URLSessionCall? {
        guard let call = calls.withLock({ $0.removeValue(forKey: task.taskIdentifier) }) else { return nil }
        Self.tasksInFlight.withLock { $0 -= 1 }
        return call
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
    /// head and body before the challenge and then waits for it to be answered, which
    /// without an answer lasts until the timeout: cancelling the challenge ends the task,
    /// and the call returns what it already received.
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

    /// Apple's URLSession only: corelibs never calls it (swift-corelibs-foundation#4988).
    func urlSession(_ session: URLSession, task: URLSessionTask, didFinishCollecting metrics: URLSessionTaskMetrics) {
        guard let call = call(task), let seen = URLSessionTransaction.seen(in: metrics) else { return }
        call.collected(seen)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        remove(task)?.completed(error, response: task.response as? HTTPURLResponse)
    }
}
