import Dispatch
import Foundation
import HTTPTypes
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One exchange on a Catena session: its body, its deadline and its cancellation.
///
/// The continuation is resumed exactly once: by the task's completion or (on corelibs)
/// the last byte of a body of declared length, or earlier by the caller's cancellation or the deadline.
///
/// corelibs aborts the process when a task is cancelled between receiving a redirect
/// and getting the delegate's answer ("Received callback for HTTP redirection, but
/// we're not waiting for it"). The answer and the cancellation are decided under one
/// lock: a call that was cancelled never answers the redirect (the task is already
/// being torn down, and corelibs' handler is dropped unanswered), and a call that has
/// answered it is not cancelled (the task then completes by itself with the 3xx,
/// at once). Catena's deadline always fires before corelibs' own idle timer, which
/// is set past it.
final class URLSessionCall: Sendable {
    struct Outcome {
        let response: HTTPURLResponse
        /// The response's header fields, read from it once.
        let fields: HTTPFields
        let body: Data
        /// A streamed body still arriving; `body` is then empty.
        var channel: BodyChannel?
        /// The time to the head, and to the body's end unless it streams.
        var timing: ResponseTiming?
    }

    private let request: APIRequest
    private let timeout: Duration
    private let limit: Int
    private let router: URLSessionRouter
    private let state = Locked(State())

    /// Streams the body (the caller gets the head at once) when set; maps a transfer
    /// error that ends a streamed body.
    private let streaming: (@Sendable (any Error) -> CatenaError)?

    init(request: APIRequest, timeout: Duration, router: URLSessionRouter, streaming: (@Sendable (any Error) -> CatenaError)? = nil) {
        self.request = request
        self.timeout = timeout
        self.limit = request[option: MaximumResponseSize.self]
        self.router = router
        self.streaming = streaming
    }

    /// Takes the caller's continuation and arms the deadline, unless the caller was
    /// cancelled already (it is then answered at once). Then makes the task with
    /// `makeTask` and starts it (see ``URLSessionRouter/start(_:)``: on the caller's
    /// thread only when no task of Catena's is in flight).
    func start(
        continuation: CheckedContinuation<Outcome, any Error>, makeTask: @escaping @Sendable () -> URLSessionTask
    ) {
        let stopped = state.withLock { state -> (any Error)? in
            state.started = true
            if let reason = state.stoppedEarly { return reason }
            state.continuation = continuation
            state.deadline = router.deadlines.add(.now() + timeout.seconds) { [weak self] in self?.stop(TotalTimeoutReached()) }
            state.resumedAt = .now
            return nil
        }
        if let stopped {
            continuation.resume(throwing: stopped)
            return
        }
        router.start { [self] in
            let task = makeTask()
            // Registered before anything can complete it, so no callback finds it missing.
            router.register(self, for: task)
            let answered = state.withLock { state -> Bool in
                // The deadline or the caller's cancellation came first: the task never runs.
                guard state.continuation != nil else { return true }
                state.task = task
                return false
            }
            if answered {
                // Never resumed: no transfer, so no redirect can be pending.
                router.unregister(task)
                task.cancel()
                return
            }
            task.resume()
        }
    }

    func cancel() {
        stop(CancellationError())
    }

    #if canImport(FoundationNetworking)
    private static let answersAtLastByte = true
    #else
    private static let answersAtLastByte = false
    #endif

    /// Removes the call's deadline from the router's timer; called with the lock held.
    private func disarm(_ state: inout State) {
        if let deadline = state.deadline { router.deadlines.remove(deadline) }
        state.deadline = nil
    }

    /// Answers the caller with `reason` now, then cancels the task unless it has
    /// answered a redirect (it then completes by itself at once). The caller does not
    /// wait for the cancellation (see ``URLSessionRouter/cancel(_:)``), and what still
    /// arrives for the task is dropped.
    private func stop(_ reason: any Error) {
        let (continuation, task) = state.withLock { state -> (CheckedContinuation<Outcome, any Error>?, URLSessionTask?) in
            guard state.started else {
                state.stoppedEarly = reason
                return (nil, nil)
            }
            guard let continuation = state.continuation else { return (nil, nil) }
            state.continuation = nil
            disarm(&state)
            state.writer = nil  // removes a partial download
            guard state.phase == .running else { return (continuation, nil) }
            state.cancelled = true
            return (continuation, state.task)
        }
        continuation?.resume(throwing: reason)
        if let task { router.cancel(task) }
    }

    /// Reports upload progress while the caller still waits. Runs on the session's
    /// serial delegate queue, like every progress callback: keep them short.
    func sent(_ total: Int64, of expected: Int64) {
        guard state.withLock({ $0.continuation != nil }) else { return }
        request[option: UploadProgress.self]?(TransferProgress(completed: total, total: expected > 0 ? expected : nil))
    }

    /// Whether the task may answer its redirect: not when it was cancelled.
    func redirecting() -> Bool {
        state.withLock { state in
            guard !state.cancelled else { return false }
            state.phase = .redirecting
            return true
        }
    }

    /// The exchange's connection, from the task's metrics (Apple's URLSession, which
    /// documents no order against the task's completion). Reported while the call is
    /// live; a buffered answer not yet handed over carries it in its timing.
    func collected(_ seen: (connection: ConnectionInfo, requestSent: Duration?)) {
        let live = state.withLock { state -> Bool in
            guard !state.cancelled, state.continuation != nil || state.channel != nil else { return false }
            state.seen = seen
            return true
        }
        if live { request.report(.connection(seen.connection)) }
    }

    func challenged() {
        state.withLock { $0.challenged = true }
    }

    func received(_ response: URLResponse) -> URLSession.ResponseDisposition {
        let request = request
        let limit = limit
        // Read once, outside the lock: each of corelibs' `value(forHTTPHeaderField:)` walks
        // every field with a case-insensitive compare, and `allHeaderFields` copies them all.
        var framing = URLSessionTransport.Framing()
        let fields = (response as? HTTPURLResponse).map { URLSessionTransport.fields(of: $0, framing: &framing) } ?? HTTPFields()
        // nil: a later head of a stream already handed over, allowed on and nothing more.
        let decided = state.withLock { state -> (stopped: Bool, failure: CatenaError?, download: HTTPURLResponse?)? in
            // After a redirect that was not followed, corelibs hands over the 3xx here.
            state.phase = .running
            // Already answered: Apple's URLSession honours `.cancel` (corelibs ignores it;
            // the cancellation is on its way).
            // A stream already handed over has no continuation but is live (Apple sends a
            // head per part of multipart/x-mixed-replace): it is allowed on.
            // Its head was reported and checked once; the parts' bodies go on into the
            // same channel.
            guard !state.cancelled, state.continuation != nil || state.channel != nil else { return (true, nil, nil) }
            guard state.continuation != nil else { return nil }
            guard let http = response as? HTTPURLResponse else {
                return (false, CatenaError(.invalidResponse, request: request, detail: "the answer is not an HTTP response"), nil)
            }
            state.response = http
            state.fields = fields
            state.headAt = .now
            let downloads = request[option: DownloadDestination.self] != nil && (200..<300).contains(http.statusCode)
            // A HEAD, 204 or 304 has no body whatever its Content-Length says, and a
            // download goes to a file: only a body held in memory is limited (a stream's
            // when it is collected).
            let bodiless = request.method == .head || http.statusCode == 204 || http.statusCode == 304
            do throws(CatenaError) {
                try Self.checkFraming(
                    framing, status: http.statusCode, limit: bodiless || downloads || streaming != nil ? .max : limit, request: request)
            } catch {
                return (false, error, nil)
            }
            // Only a final head's length, only a body that arrives as sent (no coding;
            // a length beside chunked framing failed above), and not while a request body
            // may still be going out. Only on corelibs, whose completion waits a turn of
            // the delegate queue: Apple's completes the task right after the last byte,
            // and the metrics naming the connection, which may come first, need the call.
            state.declaredLength = nil
            if Self.answersAtLastByte, http.statusCode >= 200, !bodiless, !downloads, streaming == nil, request.body.isEmpty, state.body.isEmpty,
                http.expectedContentLength > 0, framing.contentEncoding == nil
            {
                state.declaredLength = Int(http.expectedContentLength)
            }
            return (false, nil, downloads ? http : nil)
        }
        guard let (stopped, failure, download) = decided else { return .allow }
        if stopped { return .cancel }
        if let failure {
            stop(failure)
            return .cancel
        }
        if let head = state.withLock({ $0.timing(bodyEnded: nil) }), let http = response as? HTTPURLResponse {
            request.report(.responseHead(status: http.statusCode, after: head.timeToFirstByte))
        }
        if streaming != nil, download == nil, let head = state.withLock({ $0.response }) {
            startStream(head)
        }
        if let download, let destination = request[option: DownloadDestination.self] {
            // Opened outside the lock: the destination's progress callback is the caller's code.
            let length = download.expectedContentLength >= 0 ? download.expectedContentLength : nil
            switch Result(catching: { () throws(CatenaError) in try DownloadWriter(destination, expectedLength: length, request: request) }) {
            case .success(let writer):
                state.withLock { state in
                    if state.continuation != nil { state.writer = writer }
                }
            case .failure(let error):
                stop(error)
            }
        }
        return .allow
    }

    /// Hands the head to the caller now and the body to a channel as it arrives. The
    /// task is paused while the reader's window is full and resumed when it has room.
    private func startStream(_ head: HTTPURLResponse) {
        let channel = BodyChannel(
            request: request, window: request[option: StreamWindow.self],
            idle: request[option: StreamIdleTimeout.self]
        ) { [weak self] in self?.cancelStream() }
        channel.setOnRoom { [weak self] in
            self?.state.withLock { state in
                guard state.suspended else { return }
                state.suspended = false
                state.task?.resume()
            }
        }
        let answer = state.withLock { state -> (CheckedContinuation<Outcome, any Error>, Outcome)? in
            guard let continuation = state.continuation else { return nil }
            state.continuation = nil
            state.channel = channel
            // The deadline was for the head; the body has the idle timeout.
            disarm(&state)
            return (continuation, Outcome(response: head, fields: state.fields, body: Data(), channel: channel, timing: state.timing(bodyEnded: nil)))
        }
        if let (continuation, outcome) = answer { continuation.resume(returning: outcome) }
    }

    /// The reader left or went silent too long: stop the transfer.
    private func cancelStream() {
        let task = state.withLock { state -> URLSessionTask? in
            state.cancelled = true
            return state.task
        }
        if let task { router.cancel(task) }
    }

    func received(_ data: Data) {
        if let channel = state.withLock({ $0.channel }) {
            let room = channel.offer(data)
            #if !canImport(FoundationNetworking)
            // Apple's URLSession pauses a suspended transfer. corelibs keeps delivering
            // after `suspend()`, so there the channel's overflow limit bounds memory.
            if !room {
                // Re-checked under the call's lock: a reader that drained the window in
                // between has already asked for room, and the task must not sleep on.
                state.withLock { state in
                    guard channel.isProducerPaused, !state.suspended, let task = state.task else { return }
                    state.suspended = true
                    task.suspend()
                }
            }
            #else
            _ = room
            #endif
            return
        }
        let request = request
        let limit = limit
        typealias Finished = (CheckedContinuation<Outcome, any Error>, Outcome, URLSessionTask?)
        let (writer, overLimit, finished) = state.withLock { state -> (DownloadWriter?, Bool, Finished?) in
            guard state.continuation != nil else { return (nil, false, nil) }
            if let writer = state.writer { return (writer, false, nil) }
            // Counted as the bytes arrive (decoded, when the body was compressed), so a
            // small compressed body cannot grow into gigabytes before anyone looks.
            guard state.body.count + data.count <= limit else {
                state.body = Data()
                return (nil, true, nil)
            }
            state.body.append(data)
            guard state.body.count == state.declaredLength, let continuation = state.continuation, let response = state.response else {
                return (nil, false, nil)
            }
            state.continuation = nil
            disarm(&state)
            state.phase = .completed
            let task = state.task
            state.task = nil
            let outcome = Outcome(response: response, fields: state.fields, body: state.body, timing: state.timing(bodyEnded: .now))
            return (nil, false, (continuation, outcome, task))
        }
        if let (continuation, outcome, task) = finished {
            // All the declared bytes are here, none of them to inflate: the caller is
            // answered now, not a turn of the delegate queue later when corelibs reports
            // the task complete, and the task no longer counts as in flight (what still
            // comes for it finds no call and is dropped).
            if let task { router.unregister(task) }
            continuation.resume(returning: outcome)
            return
        }
        if overLimit {
            // Answered now: libcurl may go on inflating a compressed body for seconds
            // before the cancellation reaches it, and what it still delivers is dropped
            // above as fast as it comes.
            stop(CatenaError(.invalidResponse, request: request, detail: "the body has more than the \(limit) bytes allowed (MaximumResponseSize)"))
            return
        }
        guard let writer else { return }
        // Written outside the lock: the destination's progress callback is the caller's code.
        do throws(CatenaError) {
            try writer.write(data, request: request)
        } catch {
            stop(error)
        }
    }

    /// `response` is the task's own: corelibs never hands a redirect's head to the
    /// delegate, so a 3xx that was not followed (no usable Location) is only there.
    func completed(_ error: (any Error)?, response taskResponse: HTTPURLResponse?) {
        let request = request
        if let streaming,
            let (channel, challenged) = state.withLock({ state -> (BodyChannel, Bool)? in
                state.phase = .completed
                state.task = nil
                return state.channel.map { ($0, state.challenged) }
            })
        {
            let answeredChallenge = challenged && (error as? URLError)?.code == .cancelled
            channel.finish(error.flatMap { answeredChallenge ? nil : streaming($0) })
            return
        }
        let (continuation, outcome) = state.withLock { state -> (CheckedContinuation<Outcome, any Error>?, Result<Outcome, any Error>) in
            state.phase = .completed
            disarm(&state)
            state.task = nil
            let writer = state.writer
            state.writer = nil
            guard let continuation = state.continuation else { return (nil, .failure(CancellationError())) }
            state.continuation = nil
            let answeredChallenge = state.challenged && (error as? URLError)?.code == .cancelled
            if let error, !answeredChallenge { return (continuation, .failure(error)) }
            guard let response = state.response ?? taskResponse else { return (continuation, .failure(URLError(.badServerResponse))) }
            var fields = state.fields
            if state.response == nil {
                var framing = URLSessionTransport.Framing()
                fields = URLSessionTransport.fields(of: response, framing: &framing)
                do throws(CatenaError) {
                    try Self.checkFraming(framing, status: response.statusCode, limit: .max, request: request)
                } catch {
                    return (continuation, .failure(error))
                }
            }
            if let writer {
                do throws(CatenaError) {
                    try writer.finish(request: request)
                } catch {
                    return (continuation, .failure(error))
                }
                return (continuation, .success(Outcome(response: response, fields: fields, body: Data(), timing: state.timing(bodyEnded: .now))))
            }
            return (continuation, .success(Outcome(response: response, fields: fields, body: state.body, timing: state.timing(bodyEnded: .now))))
        }
        continuation?.resume(with: outcome)
    }
}
