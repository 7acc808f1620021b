package import Foundation

/// The pipe between a transport that receives a body and the one task that reads it.
///
/// - **Bounded.** At most `window` bytes wait unread. A producer that can wait
///   (AsyncHTTPClient) awaits ``send(_:)``, which returns once there is room; one that
///   cannot (URLSession's delegate) calls ``offer(_:)`` and pauses its task when told
///   the window is full, until `onRoom` asks it to go on.
/// - **Ends exactly once**, by the first of: the producer finishes or fails, the
///   reader cancels or leaves, the idle timer fires. `onTerminate` (which cancels the
///   request) then runs once, unless the body ended because the producer finished it.
/// - **Idle timeout.** With `idle` set, a body that sends nothing for that long fails
///   with ``CatenaError/Code/timedOut``.
package final class BodyChannel: Sendable {
    private let state = Locked(State())
    private let window: Int
    private let idle: Duration?
    let request: APIRequest

    /// - Parameters:
    ///   - window: the most bytes held unread.
    ///   - idle: the longest silence allowed between chunks (and before the first).
    ///   - onTerminate: stops the transfer; runs once when the body ends for any reason
    ///     but the producer's own finish.
    package init(request: APIRequest, window: Int, idle: Duration?, onTerminate: @escaping @Sendable () -> Void) {
        self.request = request
        self.window = max(1, window)
        self.idle = idle
        state.withLock { $0.onTerminate = onTerminate }
        if let idle { armTimer(idle) }
    }

    deinit {
        state.withLock { $0.timer }?.cancel()
    }

    /// Called when a producer paused by ``offer(_:)`` may send again.
    package func setOnRoom(_ onRoom: @escaping @Sendable () -> Void) {
        state.withLock { $0.onRoom = onRoom }
    }

    // MARK: Producer

    /// Hands a chunk to the reader, waiting while the window is full. False when the
    /// body has ended (the reader left): stop producing.
    package func send(_ chunk: Data) async -> Bool {
        guard !chunk.isEmpty else { return state.withLock { $0.end == nil } }
        enum Next { case delivered(CheckedContinuation<Data?, any Error>?), full, ended }
        let next = state.withLock { state -> Next in
            guard state.end == nil else { return .ended }
            if idle != nil { state.lastActivity = .now() }
            if let reader = state.reader {
                state.reader = nil
                return .delivered(reader)
            }
            store(.data(chunk), in: &state)
            return state.buffered >= window ? .full : .delivered(nil)
        }
        switch next {
        case .ended: return false
        case .delivered(let reader):
            reader?.resume(returning: chunk)
            return true
        case .full:
            return await withCheckedContinuation { continuation in
                let resumeNow = state.withLock { state -> Bool? in
                    if state.end != nil { return false }
                    if state.buffered < window { return true }
                    state.writer = continuation
                    return nil
                }
                if let resumeNow { continuation.resume(returning: resumeNow) }
            }
        }
    }

    /// How far past the window a producer that cannot pause may run before the body
    /// fails: corelibs URLSession keeps delivering after `suspend()`, so this is what
    /// bounds its memory (8 MiB at the default window).
    var overflowLimit: Int { max(window * 16, 4 * 1024 * 1024) }

    /// Parts up to this size that wait unread are gathered into one chunk, up to
    /// ``gatherLimit`` bytes, rather than held one by one.
    ///
    /// A server decides how small its parts are: an event stream sends one per event,
    /// and a hostile one can send a chunked body one byte per chunk. Held one by one,
    /// each part costs a slot in the list of chunks and, from 15 bytes up (smaller ones
    /// are stored inline), a `Data` storage of its own: two allocations when copied out
    /// of a read buffer, and up to a hundred bytes the window does not count. Gathered,
    /// a read's small parts cost one chunk, whose storage grows by half again as it
    /// fills: the window holds at most about 1.5 times what it counts.
    static let smallPart = 4 * 1024

    /// The largest chunk small parts are gathered into.
    static let gatherLimit = 64 * 1024

    /// Hands a chunk to the reader without waiting. Returns false when the window is
    /// now full: pause the transfer until `onRoom` runs. A producer that cannot pause
    /// and runs past ``overflowLimit`` fails the body. A chunk after the end is dropped.
    @discardableResult
    package func offer(_ chunk: Data) -> Bool {
        hand(.data(chunk), wakeLater: false).room
    }

    /// What a producer learns from ``offerBatched(_:)``.
    package struct Offered: Sendable, Equatable {
        /// False when the window is now full: pause the transfer until `onRoom` runs.
        package var room: Bool
        /// The reader waits for this chunk and has not been woken: call ``wakeReader()``
        /// once the parts at hand are handed over.
        package var wake: Bool
    }

    /// Like ``offer(_:)``, but a waiting reader is not woken for each chunk: the
    /// producer calls ``wakeReader()`` once, when ``Offered/wake`` says so, after the
    /// parts it has at hand. AsyncHTTPClient hands over a read's parts one by one in
    /// one go; woken per part, a reader that keeps up would wait (and be woken) again
    /// for each, where one wake-up for the lot is what the raw body sequence costs.
    package func offerBatched(_ chunk: Data) -> Offered {
        hand(.data(chunk), wakeLater: true)
    }

    /// Like ``offerBatched(_:)`` for a part that is a small slice of a transport's read
    /// buffer: its bytes are copied (holding the slice would pin the whole buffer while
    /// the window counts only the slice). Up to ``smallPart`` bytes they go straight
    /// into the chunk that gathers small parts when one waits unread, with no `Data` of
    /// their own; a larger part becomes a chunk of its own size.
    package func offerBatched(copying bytes: UnsafeRawBufferPointer) -> Offered {
        hand(.bytes(bytes), wakeLater: true)
    }

    /// A part as a producer hands it over: a `Data`, or bytes to copy.
    private enum Part {
        case data(Data)
        case bytes(UnsafeRawBufferPointer)

        var count: Int {
            switch self {
            case .data(let data): data.count
            case .bytes(let bytes): bytes.count
            }
        }

        /// The part as a chunk of its own.
        var chunk: Data {
            switch self {
            case .data(let data): data
            // Never empty: `hand` drops empty parts.
            case .bytes(let bytes): Data(bytes: bytes.baseAddress!, count: bytes.count)
            }
        }

        /// Whether it may be gathered with other small parts.
        var isSmall: Bool { count <= BodyChannel.smallPart }

        func append(to chunk: inout Data) {
            switch self {
            case .data(let data): chunk.append(data)
            case .bytes(let bytes): chunk.append(bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), count: bytes.count)
            }
        }
    }

    /// Hands the oldest waiting chunk to a reader whose wake-up ``offerBatched(_:)``
    /// deferred. Harmless when nobody waits any more.
    package func wakeReader() {
        let handOver = state.withLock { state -> (CheckedContinuation<Data?, any Error>, Data, (@Sendable () -> Void)?, CheckedContinuation<Bool, Never>?)? in
            state.wakePending = false
            guard let reader = state.reader, let (chunk, room, writer) = state.take(window: window, tracksActivity: idle != nil) else { return nil }
            state.reader = nil
            return (reader, chunk, room, writer)
        }
        guard let (reader, chunk, room, writer) = handOver else { return }
        // The reader first: on the event loop, `room` lets the transport run on at once.
        reader.resume(returning: chunk)
        writer?.resume(returning: true)
        room?()
    }

    /// Adds `part` to the unread chunks: appended to the newest when both are small and
    /// it is still unread, else as a chunk of its own.
    private func store(_ part: Part, in state: inout State) {
        let count = part.count
        let small = part.isSmall
        if small, state.lastGathers, state.head < state.chunks.count, state.chunks[state.chunks.count - 1].count + count <= Self.gatherLimit {
            part.append(to: &state.chunks[state.chunks.count - 1])
        } else {
            state.chunks.append(part.chunk)
            state.lastGathers = small
        }
        state.buffered += count
        state.peak = max(state.peak, state.buffered)
        state.peakChunks = max(state.peakChunks, state.chunks.count - state.head)
    }

    private func hand(_ part: Part, wakeLater: Bool) -> Offered {
        let count = part.count
        guard count > 0 else { return Offered(room: true, wake: false) }
        enum Outcome { case held(Offered), delivered(CheckedContinuation<Data?, any Error>), overflow }
        let outcome = state.withLock { state -> Outcome in
            guard state.end == nil else { return .held(Offered(room: true, wake: false)) }
            if state.buffered + count > overflowLimit { return .overflow }
            if idle != nil { state.lastActivity = .now() }
            // A reader waits only on an empty window unless its wake-up is pending.
            if !wakeLater, state.head == state.chunks.count, let reader = state.reader {
                state.reader = nil
                return .delivered(reader)
            }
            store(part, in: &state)
            var offered = Offered(room: true, wake: false)
            if state.reader != nil, !state.wakePending {
                state.wakePending = true
                offered.wake = true
            }
            // Told once, when the window becomes full: the producer pauses once and
            // is resumed once by `onRoom`.
            if state.buffered >= window, !state.producerPaused {
                state.producerPaused = true
                offered.room = false
            }
            return .held(offered)
        }
        switch outcome {
        case .held(let offered):
            // A producer that does not batch has nobody to wake later.
            if offered.wake, !wakeLater { wakeReader() }
            return offered
        case .delivered(let reader):
            reader.resume(returning: part.chunk)
            return Offered(room: true, wake: false)
        case .overflow:
            terminate(
                with: CatenaError(
                    .invalidResponse, request: request,
                    detail: "the reader fell more than \(overflowLimit) bytes behind the transfer, which this transport cannot pause"))
            return Offered(room: false, wake: false)
        }
    }

    /// The producer's end: nil for a complete body, else the error.
    package func finish(_ error: CatenaError? = nil) {
        enum Reader { case none, chunk(CheckedContinuation<Data?, any Error>, Data), end(CheckedContinuation<Data?, any Error>) }
        let (reader, writer, timer) = state.withLock { state -> (Reader, CheckedContinuation<Bool, Never>?, (any DispatchSourceTimer)?) in
            guard state.end == nil else { return (.none, nil, nil) }
            state.end = .some(error)
            state.onTerminate = nil  // the transfer is over by itself
            state.onRoom = nil
            let writer = state.writer
            defer { state.reader = nil; state.writer = nil; state.timer = nil }
            guard let waiting = state.reader else { return (.none, writer, state.timer) }
            // A reader whose wake-up was deferred waits with chunks in the window: it
            // gets the oldest now, the rest and then the end from `next()`.
            if let (chunk, _, _) = state.take(window: window, tracksActivity: idle != nil) { return (.chunk(waiting, chunk), writer, state.timer) }
            return (.end(waiting), writer, state.timer)
        }
        timer?.cancel()
        writer?.resume(returning: false)
        switch reader {
        case .none: break
        case .chunk(let reader, let chunk): reader.resume(returning: chunk)
        case .end(let reader):
            if let error { reader.resume(throwing: error) } else { reader.resume(returning: nil) }
        }
    }

    // MARK: Reader

    /// The next chunk, nil at the end. Throws the producer's error, `timedOut` when the
    /// body went silent, `cancelled` when the reading task is cancelled (which ends
    /// the transfer).
    func next() async throws(CatenaError) -> Data? {
        // A chunk already waiting is handed over without a continuation: a reader that
        // keeps up with a fast producer finds one most of the time.
        if !Task.isCancelled, let (chunk, room, writer) = state.withLock({ $0.take(window: window, tracksActivity: idle != nil) }) {
            room?()
            writer?.resume(returning: true)
            return chunk
        }
        do {
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Data?, any Error>) in
                    enum Now { case chunk(Data, (@Sendable () -> Void)?, CheckedContinuation<Bool, Never>?), end(CatenaError?), cancelled, secondReader, wait }
                    let now = state.withLock { state -> Now in
                        if let (chunk, room, writer) = state.take(window: window, tracksActivity: idle != nil) { return .chunk(chunk, room, writer) }
                        if let end = state.end { return .end(end) }
                        if Task.isCancelled { return .cancelled }
                        // One reader: a second would strand the first one's wait.
                        if state.reader != nil { return .secondReader }
                        state.reader = continuation
                        return .wait
                    }
                    switch now {
                    case .chunk(let chunk, let room, let writer):
                        room?()
                        writer?.resume(returning: true)
                        continuation.resume(returning: chunk)
                    case .end(let error):
                        if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: nil) }
                    case .cancelled:
                        continuation.resume(throwing: CancellationError())
                    case .secondReader:
                        continuation.resume(
                            throwing: CatenaError(
                                .invalidRequest, request: request,
                                detail: "the streamed body is already being read by another task: read it once"))
                    case .wait:
                        break
                    }
                }
            } onCancel: {
                terminate(with: CatenaError(.cancelled, request: request, detail: "the task reading the streamed body was cancelled"))
            }
        } catch let error as CatenaError {
            throw error
        } catch {
            throw CatenaError(.cancelled, request: request, detail: "the task reading the streamed body was cancelled")
        }
    }

    /// Ends the body from the reader's side (or the idle timer's): the transfer is
    /// stopped and whoever waits is told.
    package func terminate(with error: CatenaError) {
        let (reader, writer, timer, stop) = state.withLock {
            state -> (CheckedContinuation<Data?, any Error>?, CheckedContinuation<Bool, Never>?, (any DispatchSourceTimer)?, (@Sendable () -> Void)?) in
            guard state.end == nil else {
                // Finished by the producer but not all read: what is left is dropped,
                // and the reader gets this end instead of the clean one.
                if state.head < state.chunks.count {
                    state.chunks = []
                    state.head = 0
                    state.buffered = 0
                    state.end = .some(error)
                }
                return (nil, nil, nil, nil)
            }
            state.end = .some(error)
            state.chunks = []
            state.head = 0
            state.buffered = 0
            state.onRoom = nil
            defer { state.reader = nil; state.writer = nil; state.timer = nil; state.onTerminate = nil }
            return (state.reader, state.writer, state.timer, state.onTerminate)
        }
        timer?.cancel()
        stop?()
        writer?.resume(returning: false)
        reader?.resume(throwing: error)
    }

    /// Whether the producer was told to pause and has not been told to go on yet.
    package var isProducerPaused: Bool { state.withLock { $0.producerPaused } }

    /// The most bytes ever held unread.
    var peakBuffered: Int { state.withLock { $0.peak } }

    /// How many chunks wait unread (for tests of the gathering of small parts).
    var chunksHeld: Int { state.withLock { $0.chunks.count - $0.head } }

    /// The most chunks ever held unread.
    var peakChunks: Int { state.withLock { $0.peakChunks } }

    /// Whether a reader waits in ``next()`` (for tests that need it parked).
    var isReaderWaiting: Bool { state.withLock { $0.reader != nil } }

    /// Whether the body has ended.
    package var hasEnded: Bool { state.withLock { $0.end != nil } }

    // MARK: Idle timer

    private func armTimer(_ idle: Duration) {
        let nanoseconds = max(1, Int(min(idle.seconds, 1e9) * 1e9))
        let timer = DispatchSource.makeTimerSource(queue: .global())
        // Checks every idle/4 whether the last chunk is older than `idle`: one timer
        // per body, not one re-arm per chunk.
        let step = max(nanoseconds / 4, 1_000_000)
        timer.schedule(deadline: .now() + .nanoseconds(step), repeating: .nanoseconds(step))
        timer.setEventHandler { [weak self] in
            guard let self else { return }
            let silent = self.state.withLock { state -> Bool in
                // Only a reader starved by the server counts: a full window is the
                // reader's own slowness, not the server's silence.
                state.end == nil && state.buffered == 0
                    && DispatchTime.now().uptimeNanoseconds - state.lastActivity.uptimeNanoseconds >= UInt64(nanoseconds)
            }
            if silent {
                self.terminate(with: CatenaError(.timedOut, request: self.request, detail: "the streamed body sent nothing for \(idle)"))
            }
        }
        state.withLock { $0.timer = timer }
        timer.resume()
    }
}
