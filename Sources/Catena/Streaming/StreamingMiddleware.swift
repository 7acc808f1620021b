/// Runs a middleware written for whole responses on a stream: its `next` returns the
/// heads of streams, and the streams wait here until the middleware has decided which
/// head is its answer.
extension HTTPMiddleware {
    public func stream(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> StreamedResponse {
        let kept = KeptStreams()
        let response: APIResponse
        do {
            response = try await load(request, next: HeadsOf(next: next, kept: kept))
        } catch {
            kept.cancelAll()
            throw error
        }
        guard let id = response.request[option: StreamHeadID.self], response.body.isEmpty else {
            // The middleware answered by itself (or changed the body): that is the answer.
            kept.cancelAll()
            return StreamedResponse(complete: response)
        }
        guard var streamed = kept.take(id) else {
            kept.cancelAll()
            throw CatenaError(
                .invalidRequest, request: request,
                detail: "\(Self.self) returned the head of a stream it had already let go of: its body is gone")
        }
        kept.cancelAll()
        streamed.status = response.status
        streamed.headerFields = response.headerFields
        streamed.request = response.request
        streamed.request[option: StreamHeadID.self] = nil
        return streamed
    }
}

/// Marks the head of a kept stream, so the stream it belongs to can be found again.
enum StreamHeadID: RequestOption {
    static let defaultValue: UInt64? = nil
}

/// The streams whose heads a middleware was handed, by head.
final class KeptStreams: Sendable {
    private let streams = Locked<(next: UInt64, byID: [UInt64: StreamedResponse])>((0, [:]))

    func keep(_ stream: StreamedResponse) -> UInt64 {
        streams.withLock { state in
            state.next += 1
            state.byID[state.next] = stream
            return state.next
        }
    }

    /// The stream of head `id`, no longer kept; nil when its body was not kept or the
    /// middleware returned a head with a body of its own.
    func take(_ id: UInt64) -> StreamedResponse? {
        streams.withLock { $0.byID.removeValue(forKey: id) }
    }

    /// Cancels every stream still kept: heads the middleware discarded.
    func cancelAll() {
        let left = streams.withLock { state in
            defer { state.byID = [:] }
            return Array(state.byID.values)
        }
        for stream in left { stream.body.cancel() }
    }
}

/// The loader a middleware sees when it runs on a stream: `load` streams and returns
/// the head.
struct HeadsOf<Next: HTTPLoader>: HTTPLoader {
    let next: Next
    let kept: KeptStreams

    func load(_ request: APIRequest) async throws(CatenaError) -> APIResponse {
        // A middleware that asks again (a retry, a resend after a refresh) has let go of
        // the earlier heads: their transfers end before the new one starts, so they
        // free their connections and throttle slots (a slot held by a discarded 503
        // deadlocked RetryMiddleware above ThrottleMiddleware(maxInFlight: 1)).
        kept.cancelAll()
        let streamed = try await next.stream(request)
        var head = streamed.head
        head.request[option: StreamHeadID.self] = kept.keep(streamed)
        return head
    }

    func stream(_ request: APIRequest) async throws(CatenaError) -> StreamedResponse {
        try await next.stream(request)
    }

    func reset() async {
        await next.reset()
    }
}
