/// Stops an observation when cancelled or dropped.
public final class ObservationToken: Sendable {
    private let stop: Locked<(@Sendable () -> Void)?>

    init(_ stop: @escaping @Sendable () -> Void) {
        self.stop = Locked(stop)
    }

    /// Stops the observation now.
    public func cancel() {
        stop.withLock { stop in
            defer { stop = nil }
            return stop
        }?()
    }

    deinit {
        cancel()
    }
}

/// A loader's observers: closures and stream continuations, in the order they came.
final class Audience<Content: Sendable>: Sendable {
    typealias Handler = @MainActor @Sendable (LoadingState<Content>) -> Void

    private struct Members {
        var next: UInt64 = 0
        var handlers: [(id: UInt64, handler: Handler)] = []
        var streams: [UInt64: AsyncStream<LoadingState<Content>>.Continuation] = [:]
        /// States waiting for the delivery in progress to end: an observer that starts
        /// a load from its callback sets a new state while the others have not yet
        /// seen the one before.
        var pending: [LoadingState<Content>] = []
        var delivering = false
    }

    private let members = Locked(Members())

    func add(_ handler: @escaping Handler) -> ObservationToken {
        let id = members.withLock { members in
            members.next += 1
            members.handlers.append((members.next, handler))
            return members.next
        }
        return ObservationToken { [weak self] in
            self?.members.withLock { $0.handlers.removeAll { $0.id == id } }
        }
    }

    func stream(startingWith current: LoadingState<Content>) -> AsyncStream<LoadingState<Content>> {
        let (stream, continuation) = AsyncStream<LoadingState<Content>>.makeStream()
        continuation.yield(current)
        let id = members.withLock { members in
            members.next += 1
            members.streams[members.next] = continuation
            return members.next
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.members.withLock { $0.streams.removeValue(forKey: id) }
        }
        return stream
    }

    /// Hands `state` to every observer, after every state handed over before it; a
    /// closure removed meanwhile is skipped. Called from inside an observer, it queues
    /// the state for the delivery in progress to hand on once it is done.
    @MainActor
    func deliver(_ state: LoadingState<Content>) {
        let first = members.withLock { members -> Bool in
            members.pending.append(state)
            defer { members.delivering = true }
            return !members.delivering
        }
        guard first else { return }
        while let next = members.withLock({ members -> LoadingState<Content>? in
            if members.pending.isEmpty {
                members.delivering = false
                return nil
            }
            return members.pending.removeFirst()
        }) {
            deliverNow(next)
        }
    }

    @MainActor
    private func deliverNow(_ state: LoadingState<Content>) {
        let (ids, streams) = members.withLock { ($0.handlers.map(\.id), Array($0.streams.values)) }
        for continuation in streams { continuation.yield(state) }
        for id in ids {
            guard let handler = members.withLock({ $0.handlers.first { $0.id == id }?.handler }) else { continue }
            handler(state)
        }
    }

    func finish() {
        let streams = members.withLock { members in
            defer { members = Members() }
            return Array(members.streams.values)
        }
        for continuation in streams { continuation.finish() }
    }
}

/// The load in flight, cancellable from anywhere (a loader's deinit included).
final class RunningLoad: Sendable {
    private let task = Locked<Task<Void, Never>?>(nil)

    /// Runs `work` off the main actor, then the main-actor continuation it returns.
    @MainActor
    func start(_ work: @escaping @Sendable () async -> @MainActor @Sendable () -> Void) {
        let running = Task { @MainActor in
            let then = await work()
            guard !Task.isCancelled else { return }
            then()
        }
        task.withLock { $0 = running }
    }

    /// Cancels the load; false if none ran.
    @discardableResult
    func cancel() -> Bool {
        guard
            let running = task.withLock({ task in
                defer { task = nil }
                return task
            })
        else { return false }
        running.cancel()
        return true
    }
}
