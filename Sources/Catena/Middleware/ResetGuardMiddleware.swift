/// Makes `await chain.reset()` a clean cut: it cancels every request in flight through
/// this loader, waits for them to finish, resets the rest of the chain, and meanwhile
/// fails new requests with ``CatenaError/Code/resetInProgress``.
///
/// Put it at the top of the chain:
///
/// ```swift
/// let chain = ResetGuardMiddleware() --> TokenAuthMiddleware(...) --> RetryMiddleware() --> transport
/// await chain.reset()   // e.g. on logout
/// ```
///
/// Each request runs in a task of its own so the guard can cancel it; that costs two
/// thread hops per request, which is why this is a loader you add, not a default.
public struct ResetGuardMiddleware: HTTPMiddleware {
    private let registry = Registry()

    public init() {}

    public func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        try await guarded(request) { await next.result(for: request) }
    }

    /// A stream is guarded twice: until its head arrives like any request, and then its
    /// body, which a reset cancels (an event stream does not outlive a logout).
    public func stream(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> StreamedResponse {
        let streamed = try await guarded(request) { () async -> Result<StreamedResponse, CatenaError> in
            do throws(CatenaError) { return .success(try await next.stream(request)) } catch { return .failure(error) }
        }
        let body = streamed.body
        guard let id = registry.start(cancel: { body.cancel() }, wait: {}) else {
            body.cancel()
            throw CatenaError(.resetInProgress, request: request, detail: "the chain is being reset")
        }
        let registry = registry
        body.whenEnded { _, _ in registry.remove(id) }
        return streamed
    }

    /// Runs `work` in a task of its own that a reset cancels and waits for.
    private func guarded<Answer: Sendable>(
        _ request: APIRequest, _ work: @escaping @Sendable () async -> Result<Answer, CatenaError>
    ) async throws(CatenaError) -> Answer {
        let task = Task { await work() }
        guard let id = registry.start(cancel: { task.cancel() }, wait: { _ = await task.value }) else {
            task.cancel()
            throw CatenaError(.resetInProgress, request: request, detail: "the chain is being reset")
        }
        defer { registry.remove(id) }
        let result = await withTaskCancellationHandler {
            await task.value
        } onCancel: {
            task.cancel()
        }
        return try result.get()
    }

    /// Closes the guard, cancels and awaits the requests in flight (and cancels the
    /// streams whose bodies are still being read), resets the rest of the chain, and
    /// opens the guard again.
    public func reset(next: some HTTPLoader) async {
        let inFlight = registry.close()
        for entry in inFlight { entry.cancel() }
        for entry in inFlight { await entry.wait() }
        await next.reset()
        registry.open()
    }

    /// How many requests (and streamed bodies) are in flight through the guard.
    public var inFlight: Int { registry.count }

    final class Registry: Sendable {
        struct Entry: Sendable {
            let cancel: @Sendable () -> Void
            let wait: @Sendable () async -> Void
        }

        private struct State {
            var entries: [UInt64: Entry] = [:]
            var next: UInt64 = 0
            var resetting = 0
        }

        private let state = Locked(State())

        var count: Int { state.withLock { $0.entries.count } }

        /// Registers an entry; nil while a reset is in progress.
        func start(cancel: @escaping @Sendable () -> Void, wait: @escaping @Sendable () async -> Void) -> UInt64? {
            state.withLock { state in
                guard state.resetting == 0 else { return nil }
                state.next += 1
                state.entries[state.next] = Entry(cancel: cancel, wait: wait)
                return state.next
            }
        }

        func remove(_ id: UInt64) {
            _ = state.withLock { $0.entries.removeValue(forKey: id) }
        }

        /// Starts a reset: no new requests; returns those in flight.
        func close() -> [Entry] {
            state.withLock { state in
                state.resetting += 1
                return Array(state.entries.values)
            }
        }

        func open() {
            state.withLock { $0.resetting -= 1 }
        }
    }
}
