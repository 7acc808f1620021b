#if AsyncHTTPClient
import AsyncHTTPClient
import Catena
import Foundation
import HTTPTypes
import NIOCore
import NIOFoundationCompat
import NIOHTTP1

/// Streamed calls through AsyncHTTPClient's delegate API: each body part goes from the
/// event loop straight into the reader's window, and a full window holds the delegate's
/// future, which stops AsyncHTTPClient reading from the socket.
///
/// Next to `execute` and iterating the body, this spends no producer task per call and
/// one thread hop per part instead of two (event loop to producer task, producer task
/// to reader); the head's deadline is a timer on the event loop, not a task.
extension AsyncHTTPClientTransport {
    /// Whether a streamed call for `request` can take the delegate path: an in-memory
    /// request body (or none) whose progress nobody watches.
    static func streamsThroughDelegate(_ request: APIRequest) -> Bool {
        request.body.stream == nil && request[option: UploadProgress.self] == nil
    }

    /// One exchange, no redirects followed, its body handed over part by part as it
    /// arrives. `timeout` covers the time to the head; `StreamIdleTimeout` the silences
    /// after it.
    func sendStreamedThroughDelegate(_ request: APIRequest, timeout: Duration) async throws(CatenaError) -> StreamedResponse {
        // Only the task, its delegate and the head's timer are held across the wait: the
        // request is built and the answer made in synchronous code (see `sendGathered`).
        let (task, delegate, headTimer) = try startStreamed(request, timeout: timeout)
        let outcome = await withTaskCancellationHandler {
            await delegate.head()
        } onCancel: {
            // Only while the head is still awaited: a head already handed over keeps its
            // body, which the reader's own cancellation ends.
            if delegate.cancelled() { task.cancel() }
        }
        headTimer.cancel()
        return try delegate.response(outcome.get())
    }

    /// Builds `request` for the delegate API and starts it, with a timer for its head.
    private func startStreamed(
        _ request: APIRequest, timeout: Duration
    ) throws(CatenaError) -> (HTTPClient.Task<Void>, StreamingDelegate, Scheduled<Void>) {
        let outgoing = try delegateRequest(request, timeout: timeout)
        let delegate = StreamingDelegate(transport: self, request: request, timeout: timeout)
        // No deadline for AsyncHTTPClient: its deadline would cover the body too, and a
        // stream may run as long as its reader reads.
        let task = client.execute(request: outgoing, delegate: delegate)
        // A request AsyncHTTPClient refuses before sending fails only its future, with
        // no call to the delegate: the future is the one report that always comes.
        task.futureResult.whenFailure { delegate.failed($0) }
        let headTimer = task.eventLoop.scheduleTask(deadline: NIODeadline.now() + TimeAmount(timeout)) {
            // Only while the head is still awaited: a head that won the race keeps its body.
            if delegate.headTimedOut() { task.cancel() }
        }
        return (task, delegate, headTimer)
    }
}

extension Data {
    /// A streamed body part as `Data`: handed over without a copy when it fills at least
    /// half its read buffer, copied when it is a small slice of a larger one (a few bytes
    /// must not pin a whole read buffer while they wait in the reader's window, which
    /// counts only the bytes). NIO's `.automatic` copies every part up to 256 KiB: every
    /// byte of a stream, one more time.
    init(bodyPart part: ByteBuffer) {
        self.init(buffer: part, byteTransferStrategy: part.fillsHalfItsStorage ? .noCopy : .copy)
    }
}

extension ByteBuffer {
    /// Whether the readable bytes are at least half the storage they keep alive: such a
    /// part may be held as it is; a smaller one is copied (see `Data(bodyPart:)`).
    var fillsHalfItsStorage: Bool { readableBytes * 2 >= storageCapacity }
}

/// Hands one response's head to the waiting call and its body parts to a
/// ``BodyChannel``.
///
/// Its state is behind a lock: AsyncHTTPClient calls the delegate on the task's event
/// loop, but a client that follows redirects itself (one passed to `init(client:)`)
/// goes on with the same delegate on another loop, and the task's future reports on
/// the first.
final class StreamingDelegate: HTTPClientResponseDelegate, Sendable {
    typealias Response = Void

    struct Head: Sendable {
        var head: HTTPResponseHead
        var channel: BodyChannel
        var headArrived: ContinuousClock.Instant
    }

    private struct State {
        /// The head or the failure before it, once known; taken by the waiting call.
        var outcome: Result<Head, CatenaError>?
        var waiter: CheckedContinuation<Result<Head, CatenaError>, Never>?
        /// Set once the outcome is decided: later news before the head is dropped.
        var decided = false
        /// The body's channel, once the head was handed over.
        var channel: BodyChannel?
        /// The part the event loop holds back while the reader's window is full.
        var paused: EventLoopPromise<Void>?
        /// The reader made room before the event loop got to pausing.
        var roomEarly = false
    }

    private let transport: AsyncHTTPClientTransport
    private let request: APIRequest
    private let timeout: Duration
    /// When the request was handed to AsyncHTTPClient.
    private let started = ContinuousClock.now
    private let state = Locked(State())

    init(transport: AsyncHTTPClientTransport, request: APIRequest, timeout: Duration) {
        self.transport = transport
        self.request = request
        self.timeout = timeout
    }

    /// The streamed answer `head` makes, reported to the request's observers (on the
    /// caller's task).
    func response(_ head: Head) -> StreamedResponse {
        request.report(.responseHead(status: Int(head.head.status.code), after: head.headArrived - started))
        var streamed = StreamedResponse(
            status: HTTPResponse.Status(code: Int(head.head.status.code), reasonPhrase: head.head.status.reasonPhrase),
            headerFields: AsyncHTTPClientTransport.fields(of: head.head.headers), body: ResponseBody(channel: head.channel), request: request)
        streamed.timing = ResponseTiming(started: started, headArrived: head.headArrived)
        return streamed
    }

    /// Waits for the head (or the failure before it). Called once.
    func head() async -> Result<Head, CatenaError> {
        await withCheckedContinuation { (continuation: CheckedContinuation<Result<Head, CatenaError>, Never>) in
            let outcome = state.withLock { state -> Result<Head, CatenaError>? in
                guard let outcome = state.outcome else {
                    state.waiter = continuation
                    return nil
                }
                state.outcome = nil
                return outcome
            }
            if let outcome { continuation.resume(returning: outcome) }
        }
    }

    /// Decides the call's outcome before the body, once: the first decision wins.
    /// False when it had been decided already.
    @discardableResult
    private func decide(_ outcome: Result<Head, CatenaError>) -> Bool {
        let waiter = state.withLock { state -> CheckedContinuation<Result<Head, CatenaError>, Never>?? in
            guard !state.decided else { return .none }
            state.decided = true
            if case .success(let head) = outcome { state.channel = head.channel }
            guard let waiter = state.waiter else {
                state.outcome = outcome
                return .some(nil)
            }
            state.waiter = nil
            return .some(waiter)
        }
        guard case .some(let waiting) = waiter else { return false }
        waiting?.resume(returning: outcome)
        return true
    }

    /// The head's deadline passed: true when the call was still waiting for it (and
    /// now fails with `timedOut`), false when the head or a failure came first.
    func headTimedOut() -> Bool {
        decide(.failure(AsyncHTTPClientTransport.map(HTTPClientError.deadlineExceeded, request: request, timeout: timeout, limit: .max)))
    }

    /// The calling task was cancelled while it waited for the head: true when the call
    /// now fails with `cancelled`, false when the head or a failure came first.
    func cancelled() -> Bool {
        decide(.failure(CatenaError(.cancelled, request: request)))
    }

    func didReceiveHead(task: HTTPClient.Task<Void>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        do {
            try transport.checkHead(status: head.status, headers: head.headers, request: request)
        } catch {
            decide(.failure(error))
            return task.eventLoop.makeFailedFuture(error)
        }
        let channel = BodyChannel(request: request, window: request[option: StreamWindow.self], idle: request[option: StreamIdleTimeout.self]) {
            [weak self] in
            // The reader left, or the body went silent: stop the transfer, and let go of
            // a part held back for room that will not come.
            task.cancel()
            self?.room()
        }
        channel.setOnRoom { [weak self] in self?.room() }
        guard decide(.success(Head(head: head, channel: channel, headArrived: .now))) else {
            // The call ended first (cancelled, or out of time): nobody reads this body.
            channel.terminate(with: CatenaError(.cancelled, request: request, detail: "the call ended before its head arrived"))
            return task.eventLoop.makeFailedFuture(HTTPClientError.cancelled)
        }
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Void>, _ part: ByteBuffer) -> EventLoopFuture<Void> {
        guard let channel = state.withLock({ $0.channel }) else { return task.eventLoop.makeSucceededVoidFuture() }
        // A part that fills at least half its read buffer is handed over as it is; a
        // small slice of a larger one is copied, into the chunk that gathers a read's
        // small parts when there is one (an event stream's events).
        let offered =
            part.fillsHalfItsStorage
            ? channel.offerBatched(Data(buffer: part, byteTransferStrategy: .noCopy))
            : part.withUnsafeReadableBytes { channel.offerBatched(copying: $0) }
        if offered.wake {
            // AsyncHTTPClient hands a read's parts over one after another on the task's
            // event loop: the reader is woken once, after them, as the raw body
            // sequence wakes its reader once per read. It always calls from that loop;
            // were it ever not to, there would be no "after" to wait for: wake now.
            if task.eventLoop.inEventLoop {
                task.eventLoop.execute { channel.wakeReader() }
            } else {
                channel.wakeReader()
            }
        }
        guard !offered.room else { return task.eventLoop.makeSucceededVoidFuture() }
        // The window is full: the next part waits until the reader has made room.
        return state.withLock { state in
            if state.roomEarly {
                state.roomEarly = false
                return task.eventLoop.makeSucceededVoidFuture()
            }
            let promise = task.eventLoop.makePromise(of: Void.self)
            state.paused = promise
            return promise.futureResult
        }
    }

    /// The reader made room (or the body ended): the held part may go on.
    private func room() {
        let paused = state.withLock { state -> EventLoopPromise<Void>? in
            guard let paused = state.paused else {
                state.roomEarly = true
                return nil
            }
            state.paused = nil
            return paused
        }
        paused?.succeed()
    }

    func didReceiveError(task: HTTPClient.Task<Void>, _ error: any Error) {
        failed(error)
    }

    /// The exchange failed: before the head, the call fails; after it, the body does.
    /// Both the delegate's report and the task's future come here; the second changes
    /// nothing.
    func failed(_ error: any Error) {
        let (channel, paused) = state.withLock { state in
            defer { state.paused = nil }
            return (state.channel, state.paused)
        }
        // A part held back for room: the exchange is over, and a promise left pending
        // would keep AsyncHTTPClient's request (and this delegate) alive for good.
        paused?.succeed()
        if let channel {
            channel.finish(AsyncHTTPClientTransport.map(error, request: request, timeout: timeout, limit: .max))
        } else {
            // Before the head, a closed or garbled connection may be someone else's
            // leftover: the caller may send an idempotent request again.
            let failure: any Error = AsyncHTTPClientTransport.isConnectionFailure(error) ? AsyncHTTPClientTransport.PreHeadFailure(error: error) : error
            decide(.failure(AsyncHTTPClientTransport.map(failure, request: request, timeout: timeout, limit: .max)))
        }
    }

    func didFinishRequest(task: HTTPClient.Task<Void>) throws {
        if let channel = state.withLock({ $0.channel }) {
            channel.finish()
        } else {
            decide(.failure(AsyncHTTPClientTransport.map(HTTPClientError.remoteConnectionClosed, request: request, timeout: timeout, limit: .max)))
        }
    }
}
#endif  // AsyncHTTPClient
