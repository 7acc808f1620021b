
/// Makes `await chain.reset()` a clean cut: it cancels every request in flight through
/// this loader, waits for them to finish, resets the rest of the chain, and meanwhile
/// fails new requests with ``CatenaError/Code/resetInProgress``.
///
/// Put it at the top of the chain:
///
/// ```swift
/// let chain = ResetGuard() --> TokenAuth(...) --> Retry() --> transport
/// await chain.reset()   // e.g. on logout
/// ```
///
/// Each request runs in a task of its own so the guard can cancel it; that costs two
/// thread hops per request, which is why this is a loader you add, not a default.
public struct ResetGuard: HTTPMiddleware {
    private let registry = Registry()

    public init() {}

    public func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        let task = registry.start {
            Task { await next.result(for: request) }
        }
        guard let task else { throw CatenaError(.resetInProgress, request: request, detail: "the chain is being reset") }
        defer { registry.remove(task) }
        let result = await withTaskCancellationHandler {
            await task.value
        } onCancel: {
            task.cancel()
        }
        return try result.get()
    }

    /// Closes the guard, cancels and awaits the requests in flight, resets the rest of
    /// the chain, and opens the guard again.
    public func reset(next: some HTTPLoader) async {
        let inFlight = registry.close()
        for task in inFlight { task.cancel() }
        for task in inFlight { _ = await task.value }
        await next.reset()
        registry.open()
    }

    /// How many requests are in flight through the guard.
    public var inFlight: Int { registry.count }

    typealias RequestTask = Task<Result<APIResponse, CatenaError>, Never>

    final class Registry: Sendable {
        private struct State {
            var tasks: [RequestTask] = []
            var resetting = 0
        }

        private let state = Locked(State())

        var count: Int { state.withLock { $0.tasks.count } }

        /// Starts and registers a request's task; nil, and nothing started, while a
        /// reset is in progress.
        func start(_ makeTask: () -> RequestTask) -> RequestTask? {
            state.withLock { state in
                guard state.resetting == 0 else { return nil }
                let task = makeTask()
                state.tasks.append(task)
                return task
            }
        }

        func remove(_ task: RequestTask) {
            state.withLock { state in
                if let index = state.tasks.firstIndex(of: task) { state.tasks.swapAt(index, state.tasks.count - 1); state.tasks.removeLast() }
            }
        }

        /// Starts a reset: no new requests; returns those in flight.
        func close() -> [RequestTask] {
            state.withLock { state in
                state.resetting += 1
                return state.tasks
            }
        }

        func open() {
            state.withLock { $0.resetting -= 1 }
        }
    }
}
