#if AsyncHTTPClient
import AsyncHTTPClient
import Catena
import Foundation
import HTTPTypes
import NIOCore
import NIOFoundationCompat
import NIOHTTP1

/// Streamed calls. Most go through AsyncHTTPClient's delegate API: each body part goes from the
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
    ///
    /// As in `sendGathered`, the call's task holds only the delegate across its one wait,
    /// and the exchange is started on an event loop, in one hop.
    func sendStreamedThroughDelegate(_ request: APIRequest, timeout: Duration) async throws(CatenaError) -> StreamedResponse {
        let delegate = try StreamingDelegate(transport: self, request: request, timeout: timeout)
        await withTaskCancellationHandler {
            await withUnsafeContinuation { delegate.start(resuming: $0) }
        } onCancel: {
            delegate.cancelHead()
        }
        return try delegate.answer()
    }

    /// One exchange, no redirects followed, its body read as it arrives by a task of
    /// its own. Only streamed calls the delegate path cannot take come here (a streamed
    /// or watched request body, a client that traces); see `sendStreamedThroughDelegate`.
    func sendStreaming(_ request: APIRequest, timeout: Duration) async throws(CatenaError) -> StreamedResponse {
        let outgoing = try await outgoing(request)
        guard !Task.isCancelled else { throw CatenaError(.cancelled, request: request) }
        let response: HTTPClientResponse
        let started = ContinuousClock.now
        do {
            do {
                // AsyncHTTPClient's deadline ends with the head: exactly the head timeout.
                response = try await client(for: request).execute(outgoing, deadline: NIODeadline.now() + TimeAmount(timeout))
            } catch let error where Self.isConnectionFailure(error) {
                throw PreHeadFailure(error: error)
            }
            try checkHead(status: response.status, headers: response.headers, request: request)
        } catch {
            throw Self.map(error, request: request, timeout: timeout, limit: .max)
        }
        let headArrived = ContinuousClock.now
        let timing = ResponseTiming(started: started, headArrived: headArrived, seen: connection(in: response.headers, started: started, request: request))
        request.report(.responseHead(status: Int(response.status.code), after: timing.timeToFirstByte))
        let producer = Locked<Task<Void, Never>?>(nil)
        let channel = BodyChannel(
            request: request, window: request[option: StreamWindow.self],
            idle: request[option: StreamIdleTimeout.self]
        ) {
            producer.withLock { $0 }?.cancel()
        }
        let body = response.body
        // Reads as long as the reader has room: `send` waits while the window is full,
        // and AsyncHTTPClient then stops reading from the socket.
        let task = Task {
            do {
                for try await chunk in body {
                    guard await channel.send(Data(bodyPart: chunk)) else { return }
                }
                channel.finish()
            } catch {
                channel.finish(Self.map(error, request: request, timeout: timeout, limit: .max))
            }
        }
        producer.withLock { $0 = task }
        if channel.hasEnded { task.cancel() }
        var streamed = StreamedResponse(
            status: Self.status(of: response.status),
            headerFields: responseFields(of: response.headers), body: ResponseBody(channel: channel), request: request)
        streamed.timing = timing
        return streamed
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
/// the first; the caller's cancellation comes from its own thread.
final class StreamingDelegate: HTTPClientResponseDelegate, Sendable {
    typealias Response = Void

    struct Head: Sendable {
        var head: HTTPResponseHead
        var channel: BodyChannel
        var headArrived: ContinuousClock.Instant
    }

    private struct State {
        /// The request to send; let go of once handed to AsyncHTTPClient.
        var outgoing: HTTPClient.Request?
        /// The head or the failure before it, once decided (the first decision wins).
        var outcome: Result<Head, CatenaError>?
        /// The waiting call, resumed once the outcome is decided.
        var waiter: UnsafeContinuation<Void, Never>?
        /// The exchange, once started; for the caller's cancellation.
        var task: HTTPClient.Task<Void>?
        /// The head's timer, until the outcome is decided.
        var headTimer: Scheduled<Void>?
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
    private let deadline: NIODeadline
    /// The event loop the exchange is started on.
    private let loop: any EventLoop
    /// When the request was handed to AsyncHTTPClient: once built, as `send` measures it.
    private let started: ContinuousClock.Instant
    private let state: Locked<State>

    /// A delegate for one exchange of `request` through `transport`'s client, the
    /// request built (`cancelled` when the calling task is).
    init(transport: AsyncHTTPClientTransport, request: APIRequest, timeout: Duration) throws(CatenaError) {
        state = Locked(State(outgoing: try transport.delegateRequest(request, timeout: timeout)))
        self.transport = transport
        self.request = request
        self.timeout = timeout
        self.deadline = NIODeadline.now() + TimeAmount(timeout)
        self.loop = transport.client.eventLoopGroup.any()
        self.started = .now
    }

    /// Starts the exchange on `loop` and resumes `continuation` once its head or the
    /// failure before it is decided. A call whose outcome was decided before the loop
    /// got to it (cancelled) is never sent.
    ///
    /// The continuation is unchecked (no canary object per call): `decide` resumes the
    /// one waiter once, under the lock that sets the outcome once, or this method does
    /// when the outcome came first.
    func start(resuming continuation: UnsafeContinuation<Void, Never>) {
        let decided = state.withLock { state in
            if state.outcome == nil { state.waiter = continuation }
            return state.outcome != nil
        }
        if decided { return continuation.resume() }
        loop.execute { [self] in
            guard let outgoing = state.withLock({ state in state.outcome == nil ? state.outgoing.take() : nil }) else { return }
            // No deadline for AsyncHTTPClient: its deadline would cover the body too, and a
            // stream may run as long as its reader reads.
            let task = transport.client(for: request).execute(request: outgoing, delegate: self, eventLoop: transport.eventLoopPreference(startedOn: loop))
            // A request AsyncHTTPClient refuses before sending fails only its future, with
            // no call to the delegate: the future is the one report that always comes.
            task.futureResult.whenFailure { [self] in failed($0) }
            let headTimer = loop.scheduleTask(deadline: deadline) { [self] in
                // Only while the head is still awaited: a head that won the race keeps its body.
                if headTimedOut() { task.cancel() }
            }
            let decided = state.withLock { state in
                state.task = task
                if state.outcome == nil { state.headTimer = headTimer }
                return state.outcome != nil
            }
            if decided { headTimer.cancel() }
        }
    }

    /// The calling task was cancelled while it waited for the head: unless the head or
    /// a failure came first, the call fails with `cancelled`, and its exchange is
    /// cancelled (on the loop, after its start; one not started is never sent). A head
    /// already handed over keeps its body, which the reader's own cancellation ends.
    func cancelHead() {
        guard decide(.failure(CatenaError(.cancelled, request: request))) else { return }
        loop.execute { [self] in state.withLock { $0.task }?.cancel() }
    }

    /// Whether the exchange was handed to AsyncHTTPClient (for tests).
    var wasSent: Bool { state.withLock { $0.task != nil } }

    /// The streamed answer, or the failure before it, once the caller was resumed;
    /// reported to the request's observers (on the caller's task). `@inline(never)`, so
    /// its temporaries take no room in the caller's async frame.
    @inline(never)
    func answer() throws(CatenaError) -> StreamedResponse {
        guard let outcome = state.withLock({ $0.outcome }) else { preconditionFailure("the answer is read once the head is decided") }
        let head: Head
        do {
            head = try outcome.get()
        } catch {
            throw error
        }
        let seen = transport.connection(in: head.head.headers, started: started, request: request)
        request.report(.responseHead(status: Int(head.head.status.code), after: head.headArrived - started))
        var streamed = StreamedResponse(
            status: AsyncHTTPClientTransport.status(of: head.head.status),
            headerFields: transport.responseFields(of: head.head.headers), body: ResponseBody(channel: head.channel), request: request)
        streamed.timing = ResponseTiming(started: started, headArrived: head.headArrived, seen: seen)
        return streamed
    }

    /// Decides the call's outcome before the body, once: the first decision wins, and
    /// resumes the waiting call. False when it had been decided already.
    @discardableResult
    private func decide(_ outcome: Result<Head, CatenaError>) -> Bool {
        let decided = state.withLock { state -> (waiter: UnsafeContinuation<Void, Never>?, timer: Scheduled<Void>?)? in
            guard state.outcome == nil else { return nil }
            state.outcome = outcome
            state.outgoing = nil
            if case .success(let head) = outcome { state.channel = head.channel }
            defer { (state.waiter, state.headTimer) = (nil, nil) }
            return (state.waiter, state.headTimer)
        }
        guard let decided else { return false }
        decided.timer?.cancel()
        decided.waiter?.resume()
        return true
    }

    /// The head's deadline passed: true when the call was still waiting for it (and
    /// now fails with `timedOut`), false when the head or a failure came first.
    private func headTimedOut() -> Bool {
        decide(.failure(AsyncHTTPClientTransport.map(HTTPClientError.deadlineExceeded, request: request, timeout: timeout, limit: .max)))
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
