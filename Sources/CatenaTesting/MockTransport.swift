public import Catena
public import Foundation
public import HTTPTypes

/// A transport for tests: answers a request by the first route whose method and path
/// pattern match it, else with the next queued handler, in order; and records every
/// request it saw.
///
/// ```swift
/// let mock = MockTransport()
/// mock.on(.get, "/api/users/*", json: #"{"id": 1}"#)   // every GET of one user
/// mock.respond(status: .ok, json: #"{"id": 1}"#)       // the next request with no route
/// mock.fail(.cannotConnect)                            // and the one after
/// let chain = EnvironmentMiddleware(env) --> mock
/// ```
///
/// It simulates transfer progress in chunks of ``chunkSize``: a request with
/// `UploadProgress` hears about its body going out, one with `DownloadDestination`
/// gets a 2xx body written to the file (and an empty body in the response).
///
/// Like a real transport, it produces the request's body before answering, so a body
/// that fails to encode fails here too (and uses no handler). A request that arrives
/// when no handler is left fails with `CatenaError/Code/invalidRequest` and a detail
/// that says so. Every request is recorded either way.
public final class MockTransport: HTTPLoader {
    /// Answers one request.
    public typealias Handler = @Sendable (APIRequest) async throws(CatenaError) -> APIResponse

    private struct Route {
        let method: HTTPRequest.Method?
        let segments: [Substring]
        let handler: Handler
    }

    private struct State {
        var routes: [Route] = []
        var handlers: [Handler] = []
        var requests: [APIRequest] = []
        var resets = 0
    }

    private let state = Locked(State())

    /// A mock with no handlers yet; `chunkSize` is the step of simulated progress.
    public init(chunkSize: Int = 16 * 1024) {
        self.chunkSize = max(1, chunkSize)
    }

    /// Answers every request with `method` (any method when nil) whose path matches
    /// `pattern`: segments compared as sent (percent-encoded), `*` matches one segment,
    /// `**` the rest of the path (none included). Routes are tried in the order added,
    /// before the queue.
    public func on(_ method: HTTPRequest.Method? = nil, _ pattern: String, _ handler: @escaping Handler) {
        let route = Route(method: method, segments: pattern.split(separator: "/"), handler: handler)
        state.withLock { $0.routes.append(route) }
    }

    /// Answers every matching request (see ``on(_:_:_:)``) with this response.
    public func on(
        _ method: HTTPRequest.Method? = nil, _ pattern: String, status: HTTPResponse.Status = .ok,
        headerFields: HTTPFields = [:], body: Data = Data()
    ) {
        on(method, pattern) { request throws(CatenaError) in
            APIResponse(status: status, headerFields: headerFields, body: body, request: request)
        }
    }

    /// Answers every matching request (see ``on(_:_:_:)``) with this JSON.
    public func on(_ method: HTTPRequest.Method? = nil, _ pattern: String, status: HTTPResponse.Status = .ok, json: String) {
        on(method, pattern, status: status, headerFields: [.contentType: "application/json"], body: Data(json.utf8))
    }

    private static func matches(_ route: Route, _ request: APIRequest) -> Bool {
        if let method = route.method, method != request.method { return false }
        let path = request.percentEncodedPath.split(separator: "/")
        var index = 0
        for (position, segment) in route.segments.enumerated() {
            if segment == "**" { return position == route.segments.count - 1 }
            guard index < path.count, segment == "*" || segment == path[index] else { return false }
            index += 1
        }
        return index == path.count
    }

    /// Queues a handler for the next request that no route answers.
    public func enqueue(_ handler: @escaping Handler) {
        state.withLock { $0.handlers.append(handler) }
    }

    /// Queues a response with this status, headers and body.
    public func respond(status: HTTPResponse.Status = .ok, headerFields: HTTPFields = [:], body: Data = Data()) {
        enqueue { request throws(CatenaError) in
            APIResponse(status: status, headerFields: headerFields, body: body, request: request)
        }
    }

    /// Queues a JSON response.
    public func respond(status: HTTPResponse.Status = .ok, json: String) {
        respond(status: status, headerFields: [.contentType: "application/json"], body: Data(json.utf8))
    }

    /// Answers a WebSocket upgrade (`HTTPLoader.webSocket(_:options:)`) whose path
    /// matches `pattern` (as for ``on(_:_:_:)``) with 101 and a connection that plays
    /// `script`, a fresh one each time. Any other request to that path gets 426 Upgrade
    /// Required, as a WebSocket endpoint answers.
    public func onWebSocket(_ pattern: String, _ script: WebSocketScript) {
        on(.get, pattern) { request throws(CatenaError) in
            guard let handoff = request[option: WebSocketUpgrade.self] else {
                return APIResponse(
                    status: .init(code: 426, reasonPhrase: "Upgrade Required"), headerFields: [.upgrade: "websocket"], body: Data(), request: request)
            }
            await handoff.deliver(script.frames())
            return APIResponse(status: .switchingProtocols, headerFields: [.upgrade: "websocket", .connection: "Upgrade"], body: Data(), request: request)
        }
    }

    /// Queues a failure with this code.
    public func fail(_ code: CatenaError.Code, detail: String? = nil) {
        enqueue { request throws(CatenaError) in throw CatenaError(code, request: request, detail: detail) }
    }

    /// The requests seen so far, in the order they arrived.
    public var requests: [APIRequest] { state.withLock { $0.requests } }

    /// How many handlers are still queued.
    public var pendingHandlers: Int { state.withLock { $0.handlers.count } }

    /// How many times ``reset()`` reached this transport.
    public var resetCount: Int { state.withLock { $0.resets } }

    public func load(_ request: APIRequest) async throws(CatenaError) -> APIResponse {
        let body: Result<Data?, CatenaError>
        do throws(CatenaError) {
            body = .success(try await request.bodyData())
        } catch {
            body = .failure(error)
        }
        let (handler, seen) = state.withLock { state -> (Handler?, Int) in
            state.requests.append(request)
            guard case .success = body else { return (nil, state.requests.count) }
            if let route = state.routes.first(where: { Self.matches($0, request) }) { return (route.handler, state.requests.count) }
            guard !state.handlers.isEmpty else { return (nil, state.requests.count) }
            return (state.handlers.removeFirst(), state.requests.count)
        }
        let sent = try body.get()
        guard let handler else {
            throw CatenaError(
                .invalidRequest, request: request,
                detail: "MockTransport has no route for \(request.method.rawValue) \(request.percentEncodedPath) and no handler left for request #\(seen)")
        }
        guard !Task.isCancelled else { throw CatenaError(.cancelled, request: request) }
        if let report = request[option: UploadProgress.self], let sent {
            Self.simulateProgress(of: sent.count, chunkSize: chunkSize, report: report)
        }
        let response = try await handler(request)
        guard let destination = request[option: DownloadDestination.self], (200..<300).contains(response.status.code) else {
            return response
        }
        // Like a streaming transport: the body goes to the file a chunk at a time.
        let writer = try DownloadWriter(destination, expectedLength: Int64(response.body.count), request: request)
        var offset = 0
        while offset < response.body.count {
            guard !Task.isCancelled else { throw CatenaError(.cancelled, request: request) }
            let end = min(offset + chunkSize, response.body.count)
            try writer.write(response.body.subdata(in: offset..<end), request: request)
            offset = end
        }
        try writer.finish(request: request)
        var written = response
        written.body = Data()
        return written
    }

    /// The chunk size for simulated transfer progress (uploads with `UploadProgress`,
    /// downloads with `DownloadDestination`).
    public let chunkSize: Int

    private static func simulateProgress(of count: Int, chunkSize: Int, report: @Sendable (TransferProgress) -> Void) {
        report(TransferProgress(completed: 0, total: Int64(count)))
        var completed = 0
        while completed < count {
            completed = min(completed + chunkSize, count)
            report(TransferProgress(completed: Int64(completed), total: Int64(count)))
        }
    }

    /// Counts the reset; queued handlers and recorded requests stay.
    public func reset() async {
        state.withLock { $0.resets += 1 }
    }
}
