import Foundation

/// The messages a WebSocket has read and its reader has not: one producer (the
/// socket's reading task), one consumer (the loop over `messages`). The producer waits
/// while more than `limit` bytes are held, which stops the reads from the connection;
/// every waiting continuation is resumed exactly once (by the other side, by
/// `finish`, or by its task's cancellation).
final class MessageQueue: Sendable {
    private struct State {
        /// Read messages' slots are emptied at once and dropped in bulk: a reader that
        /// never quite catches up must not keep what it read alive.
        var messages: [WebSocketMessage?] = []
        var head = 0
        var bytes = 0
        /// How the queue ended once nothing is left in it: nil for an orderly end.
        var end: CatenaError??
        var consumer: UnsafeContinuation<Result<WebSocketMessage?, CatenaError>, Never>?
        /// Which waiting `next()` the consumer is: only its own cancellation resumes it.
        var consumerID = 0
        var waits = 0
        var producer: UnsafeContinuation<Bool, Never>?
    }

    private let limit: Int
    private let request: APIRequest
    private let state = Locked(State())

    init(limit: Int, request: APIRequest) {
        self.limit = max(limit, 1)
        self.request = request
    }

    /// Hands `message` over, then waits while the unread bytes are over the limit.
    /// False once the queue has ended (the message is dropped).
    func push(_ message: WebSocketMessage) async -> Bool {
        enum Step { case ended, done, wait }
        let step = state.withLock { state -> Step in
            guard state.end == nil else { return .ended }
            if let consumer = state.consumer {
                state.consumer = nil
                consumer.resume(returning: .success(message))
                return .done
            }
            state.messages.append(message)
            state.bytes += Self.cost(of: message)
            return state.bytes > limit ? .wait : .done
        }
        switch step {
        case .ended: return false
        case .done: return true
        case .wait:
            return await withTaskCancellationHandler {
                await withUnsafeContinuation { continuation in
                    let resumeNow: Bool? = state.withLock { state in
                        if Task.isCancelled || state.end != nil { return false }
                        if state.bytes <= limit { return true }
                        state.producer = continuation
                        return nil
                    }
                    if let resumeNow { continuation.resume(returning: resumeNow) }
                }
            } onCancel: {
                state.withLock { state in
                    defer { state.producer = nil }
                    return state.producer
                }?.resume(returning: false)
            }
        }
    }

    /// The next message; nil after an orderly end; throws how the queue ended, or
    /// `cancelled` when the calling task is cancelled while waiting.
    func next() async throws(CatenaError) -> WebSocketMessage? {
        enum Step {
            case answer(Result<WebSocketMessage?, CatenaError>)
            case wait
        }
        let step = state.withLock { state -> Step in
            if let message = take(&state) { return .answer(.success(message)) }
            if let end = state.end { return .answer(end.map { .failure($0) } ?? .success(nil)) }
            if state.consumer != nil {
                return .answer(
                    .failure(CatenaError(.invalidRequest, request: request, detail: "a WebSocket's messages are read by one loop at a time")))
            }
            return .wait
        }
        let result: Result<WebSocketMessage?, CatenaError>
        switch step {
        case .answer(let answer): result = answer
        case .wait:
            let request = request
            let id = state.withLock { state in
                state.waits += 1
                return state.waits
            }
            result = await withTaskCancellationHandler {
                await withUnsafeContinuation { continuation in
                    let now: Result<WebSocketMessage?, CatenaError>? = state.withLock { state in
                        if let message = take(&state) { return .success(message) }
                        if let end = state.end { return end.map { .failure($0) } ?? .success(nil) }
                        // Checked again here: another loop may have started waiting meanwhile.
                        if state.consumer != nil {
                            return .failure(CatenaError(.invalidRequest, request: request, detail: "a WebSocket's messages are read by one loop at a time"))
                        }
                        if Task.isCancelled {
                            return .failure(CatenaError(.cancelled, request: request, detail: "the task reading the WebSocket was cancelled"))
                        }
                        state.consumer = continuation
                        state.consumerID = id
                        return nil
                    }
                    if let now { continuation.resume(returning: now) }
                }
            } onCancel: {
                state.withLock { state -> UnsafeContinuation<Result<WebSocketMessage?, CatenaError>, Never>? in
                    guard state.consumerID == id else { return nil }
                    defer { state.consumer = nil }
                    return state.consumer
                }?.resume(returning: .failure(CatenaError(.cancelled, request: request, detail: "the task reading the WebSocket was cancelled")))
            }
        }
        return try result.get()
    }

    /// Ends the queue once its messages are read: orderly with nil, else with `error`.
    /// The first end wins; a waiting producer is let go at once.
    func finish(_ error: CatenaError?) {
        let (consumer, producer, end) = state.withLock { state in
            if state.end == nil { state.end = .some(error) }
            defer {
                state.consumer = nil
                state.producer = nil
            }
            // A waiting consumer means nothing is queued: it gets the end.
            return (state.consumer, state.producer, state.end ?? nil)
        }
        consumer?.resume(returning: end.map { .failure($0) } ?? .success(nil))
        producer?.resume(returning: false)
    }

    /// What a held message counts against the limit: its bytes and its slot, so that a
    /// server's empty messages cannot fill the queue without bound.
    private static func cost(of message: WebSocketMessage) -> Int { message.byteCount + 64 }

    /// The unread bytes and slots (for tests: the memory a slow reader costs).
    var bufferedBytes: Int { state.withLock { $0.bytes } }

    /// The slots held, read or not (for tests: what a reader that never catches up costs).
    var slotCount: Int { state.withLock { $0.messages.count } }

    private func take(_ state: inout State) -> WebSocketMessage? {
        guard state.head < state.messages.count, let message = state.messages[state.head] else { return nil }
        state.messages[state.head] = nil
        state.head += 1
        state.bytes -= Self.cost(of: message)
        if state.head == state.messages.count {
            state.messages.removeAll(keepingCapacity: true)
            state.head = 0
        } else if state.head >= 32, state.head * 2 >= state.messages.count {
            // Amortised: each slot is moved at most once per slot dropped.
            state.messages.removeFirst(state.head)
            state.head = 0
        }
        if state.bytes <= limit, let producer = state.producer {
            state.producer = nil
            producer.resume(returning: true)
        }
        return message
    }
}
