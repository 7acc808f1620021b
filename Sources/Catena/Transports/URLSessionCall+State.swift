import Foundation
import HTTPTypes
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// The call's state, reached only under `URLSessionCall.state`'s lock.
extension URLSessionCall {
    enum Phase { case running, redirecting, completed }

    // @unchecked Sendable: the task, response and writer are reached only with
    // the lock held, or, once taken out of it, through thread-safe entry points (`cancel()`,
    // `resume()`) or on the session's serial delegate queue (the writer's writes).
    struct State: @unchecked Sendable {
        var continuation: CheckedContinuation<Outcome, any Error>?
        var started = false
        /// Why the call was stopped before it started.
        var stoppedEarly: (any Error)?
        var task: URLSessionTask?
        /// The deadline, on the router's one timer (``Deadlines``).
        var deadline: Deadlines.Token?
        var phase = Phase.running
        /// The caller has its answer and the task was cancelled.
        var cancelled = false
        var response: HTTPURLResponse?
        /// The header fields of `response`.
        var fields = HTTPFields()
        var body = Data()
        /// The body's declared length when it arrives as sent (no coding) and is held in
        /// memory: on corelibs the call is answered when the last of those bytes arrives.
        var declaredLength: Int?
        var writer: DownloadWriter?
        var challenged = false
        /// A streamed call's body, once its head went to the caller.
        var channel: BodyChannel?
        /// The task was suspended because the reader's window was full.
        var suspended = false
        /// When the task was resumed, and when the head arrived.
        var resumedAt: ContinuousClock.Instant?
        var headAt: ContinuousClock.Instant?
        /// The connection, from the task's metrics (Apple's URLSession only).
        var seen: (connection: ConnectionInfo, requestSent: Duration?)?

        /// The timing so far, the body ending `bodyEnded`.
        func timing(bodyEnded: ContinuousClock.Instant?) -> ResponseTiming? {
            guard let resumedAt, let headAt else { return nil }
            return ResponseTiming(started: resumedAt, headArrived: headAt, bodyEnded: bodyEnded, seen: seen)
        }
    }
}
