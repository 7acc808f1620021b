import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization

/// Catena's session for uploads and downloads that report progress.
///
/// On Linux only a *session-level* delegate hears about body chunks and bytes sent (a
/// task-level delegate receives none of those callbacks, measured), so transfers go
/// through this session, whose delegate routes each event to its call by task
/// identifier. Ordinary requests keep the delegate-less shared session: with a
/// delegate, all of a session's callbacks share one serial queue.
enum TransferSession {
    static let router = TransferRouter()

    static let session: URLSession = {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.httpShouldSetCookies = false
        configuration.httpCookieAcceptPolicy = .never
        configuration.httpMaximumConnectionsPerHost = 64
        return URLSession(configuration: configuration, delegate: router, delegateQueue: nil)
    }()
}

/// What a transfer produced: the response head, and the body unless it went to a file.
struct TransferOutcome {
    let response: HTTPURLResponse
    let body: Data
}

/// Routes the transfer session's delegate callbacks to their calls.
final class TransferRouter: NSObject, URLSessionDataDelegate, Sendable {
    private let calls = Mutex<[Int: TransferCall]>([:])

    func register(_ call: TransferCall, for task: URLSessionTask) {
        calls.withLock { $0[task.taskIdentifier] = call }
    }

    private func call(_ task: URLSessionTask) -> TransferCall? {
        calls.withLock { $0[task.taskIdentifier] }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64, totalBytesExpectedToSend: Int64) {
        call(task)?.sent(totalBytesSent, of: totalBytesExpectedToSend)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void) {
        completionHandler(call(dataTask)?.received(response, task: dataTask) ?? .cancel)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        call(dataTask)?.received(data, task: dataTask)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        CredentialStrippingRedirects.shared.urlSession(session, task: task, willPerformHTTPRedirection: response,
                                                        newRequest: request, completionHandler: completionHandler)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let call = calls.withLock { $0.removeValue(forKey: task.taskIdentifier) }
        call?.completed(error)
    }
}

/// One upload or download on the transfer session. Delegate callbacks arrive on the
/// session's serial queue; cancellation and the deadline come from other threads.
final class TransferCall: Sendable {
    private struct State {
        var continuation: CheckedContinuation<TransferOutcome, any Error>?
        var response: HTTPURLResponse?
        var body = Data()
        var writer: DownloadWriter?
        /// Why the call stopped itself (a body over the size limit, a file it cannot write).
        var failure: CatenaError?
    }

    private let request: APIRequest
    private let state = Mutex(State())
    /// The task, its deadline and its cancellation.
    private let call = TaskCall()

    init(request: APIRequest) {
        self.request = request
    }

    /// Starts `task` with its deadline; the continuation is resumed exactly once, when
    /// the task completes.
    func start(_ task: URLSessionTask, timeout: Duration, continuation: CheckedContinuation<TransferOutcome, any Error>) {
        TransferSession.router.register(self, for: task)
        state.withLock { $0.continuation = continuation }
        call.start(task, timeout: timeout)
    }

    func cancel() {
        call.cancel()
    }

    func sent(_ total: Int64, of expected: Int64) {
        request[option: UploadProgress.self]?(TransferProgress(completed: total, total: expected > 0 ? expected : nil))
    }

    func received(_ response: URLResponse, task: URLSessionTask) -> URLSession.ResponseDisposition {
        guard let http = response as? HTTPURLResponse else { return .allow }
        let request = request
        let opened = state.withLock { state -> Bool in
            state.response = http
            guard let destination = request[option: DownloadDestination.self], (200..<300).contains(http.statusCode) else { return true }
            do throws(CatenaError) {
                state.writer = try DownloadWriter(destination, expectedLength: http.expectedContentLength >= 0 ? http.expectedContentLength : nil, request: request)
                return true
            } catch {
                state.failure = error
                return false
            }
        }
        return opened ? .allow : .cancel
    }

    func received(_ data: Data, task: URLSessionTask) {
        let limit = request[option: MaximumResponseSize.self]
        let stop = state.withLock { state -> Bool in
            guard state.failure == nil else { return false }
            do throws(CatenaError) {
                if let writer = state.writer {
                    try writer.write(data, request: request)
                } else {
                    state.body.append(data)
                    if state.body.count > limit {
                        throw CatenaError(.invalidResponse, request: request,
                                          detail: "the body has more than the \(limit) bytes allowed (MaximumResponseSize)")
                    }
                }
                return false
            } catch {
                state.failure = error
                state.writer = nil   // removes the partial file
                return true
            }
        }
        if stop { task.cancel() }
    }

    func completed(_ error: (any Error)?) {
        let timedOut = call.finish()
        let (continuation, outcome) = state.withLock { state -> (CheckedContinuation<TransferOutcome, any Error>?, Result<TransferOutcome, any Error>) in
            defer {
                state.continuation = nil
                state.writer = nil
            }
            if let failure = state.failure { return (state.continuation, .failure(failure)) }
            if let error { return (state.continuation, .failure(timedOut ? TotalTimeoutReached() : error)) }
            guard let response = state.response else { return (state.continuation, .failure(URLError(.badServerResponse))) }
            if let writer = state.writer {
                do throws(CatenaError) {
                    try writer.finish(request: request)
                } catch {
                    return (state.continuation, .failure(error))
                }
            }
            return (state.continuation, .success(TransferOutcome(response: response, body: state.body)))
        }
        continuation?.resume(with: outcome)
    }
}
