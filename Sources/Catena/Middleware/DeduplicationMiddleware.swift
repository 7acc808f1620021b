public import HTTPTypes

/// Opts a request in to ``DeduplicationMiddleware``.
public enum DeduplicateRequest: RequestOption {
    public static let defaultValue = false
}

/// Lets identical GET requests in flight at the same time share one call down the
/// chain. Opt in per request with the ``DeduplicateRequest`` option.
///
/// Requests are identical when method, URL and header fields are (header names in
/// ``ignoredHeaders`` do not count). Every caller gets its own completion. A caller
/// that is cancelled stops waiting at once with ``CatenaError/Code/cancelled``; the
/// shared call goes on for the others and is cancelled only when no one waits for it.
public struct DeduplicationMiddleware: HTTPMiddleware {
    /// Header fields that do not make two requests different (a request ID, say).
    public let ignoredHeaders: Set<HTTPField.Name>
    private let table = SharedCalls()

    public init(ignoring ignoredHeaders: Set<HTTPField.Name> = []) {
        self.ignoredHeaders = ignoredHeaders
    }

    public func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        try requireAbsolute(request, loader: "DeduplicationMiddleware")
        // A download writes to its own file: never shared.
        guard request.method == .get, request[option: DeduplicateRequest.self], request[option: DownloadDestination.self] == nil,
            let key = try? key(for: request)
        else {
            return try await next.load(request)
        }
        return try await table.join(key: key, request: request) { await next.result(for: request) }.get()
    }

    /// Streams are never shared: each has one reader. They pass through.
    public func stream(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> StreamedResponse {
        try requireAbsolute(request, loader: "DeduplicationMiddleware")
        return try await next.stream(request)
    }

    /// How many shared calls are in flight.
    public var sharedCalls: Int { table.count }

    private func key(for request: APIRequest) throws(CatenaError) -> String {
        var key = request.method.rawValue + " " + (try request.urlString()) + "\n#" + request.identityFingerprint
        for field in request.headerFields where !ignoredHeaders.contains(field.name) {
            key += "\n" + field.name.canonicalName + ": " + field.value
        }
        return key
    }
}

/// Shared calls by key, each with the callers waiting for it.
final class SharedCalls: Sendable {
    typealias Outcome = Result<APIResponse, CatenaError>

    private struct Call {
        let id: UInt64
        var task: Task<Void, Never>?
        var waiters: [UInt64: CheckedContinuation<Outcome, Never>] = [:]
    }

    private struct State {
        var calls: [String: Call] = [:]
        var nextID: UInt64 = 0
    }

    private let state = Locked(State())

    var count: Int { state.withLock { $0.calls.count } }

    /// Waits for the call with `key`, starting it with `start` when there is none.
    func join(key: String, request: APIRequest, start: @escaping @Sendable () async -> Outcome) async -> Outcome {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let cancelledAlready = state.withLock { state -> Bool in
                    if Task.isCancelled { return true }
                    if state.calls[key] == nil {
                        // The call is known by the id of the caller that started it, so
                        // a finished call never removes a newer one under the same key.
                        state.calls[key] = Call(id: id)
                        state.calls[key]?.task = Task { self.finish(key: key, callID: id, with: await start()) }
                    }
                    state.calls[key]?.waiters[id] = continuation
                    return false
                }
                if cancelledAlready {
                    continuation.resume(returning: .failure(CatenaError(.cancelled, request: request)))
                }
            }
        } onCancel: {
            leave(key: key, id: id, request: request)
        }
    }

    private func finish(key: String, callID: UInt64, with outcome: Outcome) {
        let waiters = state.withLock { state -> [CheckedContinuation<Outcome, Never>] in
            guard state.calls[key]?.id == callID else { return [] }
            return state.calls.removeValue(forKey: key).map { Array($0.waiters.values) } ?? []
        }
        for waiter in waiters { waiter.resume(returning: outcome) }
    }

    /// A cancelled caller stops waiting; the last one to leave cancels the call.
    private func leave(key: String, id: UInt64, request: APIRequest) {
        let (waiter, orphaned) = state.withLock { state -> (CheckedContinuation<Outcome, Never>?, Task<Void, Never>?) in
            guard let waiter = state.calls[key]?.waiters.removeValue(forKey: id) else { return (nil, nil) }
            guard state.calls[key]?.waiters.isEmpty == true else { return (waiter, nil) }
            return (waiter, state.calls.removeValue(forKey: key)?.task)
        }
        waiter?.resume(returning: .failure(CatenaError(.cancelled, request: request, detail: "cancelled while waiting for a shared call")))
        orphaned?.cancel()
    }
}
