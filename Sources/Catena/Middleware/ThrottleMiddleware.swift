/// Per-request opt-out of a ``ThrottleMiddleware``: a request with this option set to `true`
/// goes straight through.
public enum BypassThrottle: RequestOption {
    public static let defaultValue = false
}

/// Lets at most `limit` requests through at a time; the others wait in FIFO order.
///
/// A waiting request whose task is cancelled leaves the queue at once, fails with
/// ``CatenaError/Code/cancelled`` and never starts. ``reset()`` fails every waiting
/// request with ``CatenaError/Code/cancelled``.
public struct ThrottleMiddleware: HTTPMiddleware {
    /// How many requests may be in flight through this loader at once.
    public let limit: Int
    private let gate: Gate

    /// A throttle for `limit` requests in flight (at least 1).
    public init(maxInFlight limit: Int) {
        self.limit = max(1, limit)
        self.gate = Gate(limit: max(1, limit))
    }

    public func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        if request[option: BypassThrottle.self] { return try await next.load(request) }
        guard await gate.enter() else { throw CatenaError(.cancelled, request: request, detail: "cancelled while waiting in the throttle's queue") }
        defer { gate.leave() }
        return try await next.load(request)
    }

    /// A stream holds its slot until its body ends: read to the end, failed,
    /// cancelled or dropped.
    public func stream(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> StreamedResponse {
        if request[option: BypassThrottle.self] { return try await next.stream(request) }
        guard await gate.enter() else { throw CatenaError(.cancelled, request: request, detail: "cancelled while waiting in the throttle's queue") }
        let streamed: StreamedResponse
        do {
            streamed = try await next.stream(request)
        } catch {
            gate.leave()
            throw error
        }
        let gate = gate
        streamed.body.whenEnded { _, _ in gate.leave() }
        return streamed
    }

    /// Fails every waiting request; those in flight finish (the reset reaches them
    /// through the loaders further down).
    public func reset() async {
        gate.failAll()
    }

    /// How many requests are waiting now.
    public var waiting: Int { gate.waiting }

    /// Whether the gate's invariant holds: a free slot implies an empty queue.
    var invariantHolds: Bool { gate.invariantHolds }
}

/// A FIFO semaphore whose waiters can leave when cancelled.
final class Gate: Sendable {
    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Bool, Never>
    }

    private struct State {
        var available: Int
        var queue: [Waiter] = []
        var nextID: UInt64 = 0
    }

    private let state: Locked<State>
    /// Runs between the first look for a slot and joining the queue: tests use it to
    /// free a slot in exactly that gap.
    private let beforeQueueing: (@Sendable () -> Void)?

    init(limit: Int, beforeQueueing: (@Sendable () -> Void)? = nil) {
        state = Locked(State(available: limit))
        self.beforeQueueing = beforeQueueing
    }

    var waiting: Int { state.withLock { $0.queue.count } }

    var invariantHolds: Bool { state.withLock { $0.available == 0 || $0.queue.isEmpty } }

    /// Waits for a slot. Returns false when the task was cancelled while waiting (or
    /// before), in which case no slot is held.
    func enter() async -> Bool {
        if Task.isCancelled { return false }
        let (entered, id) = state.withLock { state -> (Bool, UInt64) in
            state.nextID += 1
            if state.available > 0 && state.queue.isEmpty {
                state.available -= 1
                return (true, state.nextID)
            }
            return (false, state.nextID)
        }
        if entered { return true }
        beforeQueueing?()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                // Decided again under the lock that queues: a slot freed since the
                // first look went back to `available` with nobody queued to take it,
                // and would stay free while this request waited for good.
                let outcome = state.withLock { state -> Bool? in
                    if Task.isCancelled { return false }
                    if state.available > 0 && state.queue.isEmpty {
                        state.available -= 1
                        return true
                    }
                    state.queue.append(Waiter(id: id, continuation: continuation))
                    return nil
                }
                if let outcome { continuation.resume(returning: outcome) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> Waiter? in
                guard let index = state.queue.firstIndex(where: { $0.id == id }) else { return nil }
                return state.queue.remove(at: index)
            }
            waiter?.continuation.resume(returning: false)
        }
    }

    /// Hands the slot to the first waiter, or frees it.
    func leave() {
        let next = state.withLock { state -> Waiter? in
            if !state.queue.isEmpty { return state.queue.removeFirst() }
            state.available += 1
            return nil
        }
        next?.continuation.resume(returning: true)
    }

    /// Resumes every waiter with false (no slot).
    func failAll() {
        let waiters = state.withLock { state -> [Waiter] in
            defer { state.queue.removeAll() }
            return state.queue
        }
        for waiter in waiters { waiter.continuation.resume(returning: false) }
    }
}
