public import Foundation

/// An endpoint whose content arrives over time: bytes, events or records, read as the
/// server sends them when the endpoint goes through ``Client/stream(_:)``.
///
/// ```swift
/// struct Export: JSONLinesEndpoint {
///     typealias Record = Row
///     func makeRequest() throws -> APIRequest { try .get("api", "export.jsonl") }
/// }
/// for try await row in try await client.stream(Export()) { … }
/// ```
///
/// It is an ``Endpoint`` too: `Client.send(_:)` collects the whole body
/// first and then hands out the same sequence over it.
public protocol StreamingEndpoint: Endpoint {
    /// Turns an accepted response, whose body may still be arriving, into content.
    func content(from response: StreamedResponse, context: EndpointContext) throws -> Content
}

extension StreamingEndpoint {
    public func content(from response: APIResponse, context: EndpointContext) throws -> Content {
        try content(from: StreamedResponse(complete: response), context: context)
    }
}

/// A streaming endpoint whose content is the body's bytes as they arrive.
public protocol ByteStreamEndpoint: StreamingEndpoint where Content == ResponseBody {}

extension ByteStreamEndpoint {
    public func content(from response: StreamedResponse, context: EndpointContext) throws -> ResponseBody { response.body }
}

/// A streaming endpoint whose content is server-sent events from one connection.
/// For events that go on across dropped connections, use
/// ``Client/eventSource(for:policy:onReconnect:)``.
public protocol EventStreamEndpoint: StreamingEndpoint where Content == ServerSentEvents {
    /// The largest event (and line) accepted; the default is 4 MiB.
    var maxEventBytes: Int { get }
}

extension EventStreamEndpoint {
    public var maxEventBytes: Int { 4 << 20 }

    public func content(from response: StreamedResponse, context: EndpointContext) throws -> ServerSentEvents {
        response.serverSentEvents(maxEventBytes: maxEventBytes)
    }
}

/// A streaming endpoint whose content is JSON Lines (or, with `format`, a JSON text
/// sequence, RFC 7464), each record decoded as `Record` with the endpoint's decoder
/// or the client's.
public protocol JSONLinesEndpoint: StreamingEndpoint where Content == JSONRecords<Record> {
    /// What each line decodes to.
    associatedtype Record: Decodable & Sendable
    /// A decoder for this endpoint only; nil (the default) uses the client's.
    var decoder: JSONDecoder? { get }
    /// Whether records are lines (the default) or RFC 7464 records.
    var format: JSONRecordFormat { get }
    /// The largest record accepted; the default is 1 MiB.
    var maxRecordBytes: Int { get }
}

/// How records are delimited in a ``JSONLinesEndpoint``'s body.
public enum JSONRecordFormat: Sendable {
    /// JSON Lines (NDJSON): one record per line.
    case lines
    /// A JSON text sequence (RFC 7464, `application/json-seq`).
    case textSequence
}

extension JSONLinesEndpoint {
    public var decoder: JSONDecoder? { nil }
    public var format: JSONRecordFormat { .lines }
    public var maxRecordBytes: Int { 1 << 20 }

    public func content(from response: StreamedResponse, context: EndpointContext) throws -> JSONRecords<Record> {
        let decoder = self.decoder ?? context.decoder
        switch format {
        case .lines: return response.jsonLines(of: Record.self, maxLineBytes: maxRecordBytes) { decoder }
        case .textSequence: return response.jsonSequence(of: Record.self, maxRecordBytes: maxRecordBytes) { decoder }
        }
    }
}

extension Client {
    /// Sends `endpoint` and returns its content as soon as the response head is
    /// accepted; the body is read as the content is iterated.
    ///
    /// The request goes through the same chain as `send(_:)`: a 401 head
    /// still refreshes and resends, and logging, throttling and retry apply to the
    /// stream (see ``HTTPLoader/stream(_:)``). A head the endpoint rejects throws as
    /// `send` does; when it rejects a status outside 2xx, the first 64 KiB of the body
    /// (waited for at most 5 s) are read first, so the error carries the API's error
    /// body. A status the endpoint accepts streams like a 2xx.
    /// Leaving the loop over the content, or dropping it, cancels the request.
    public func stream<E: StreamingEndpoint>(_ endpoint: E) async throws(CatenaError) -> E.Content {
        let request = try endpoint.buildRequest()
        let response = try await loader.stream(request)
        var head = response.head
        do {
            do {
                try endpoint.validate(head)
            } catch  where !(200..<300).contains(response.status.code) {
                // Refused: read the start of the body so the error carries the API's
                // error body (validate sees it too, as `send` would show it).
                head = await Self.problem(of: response)
                try endpoint.validate(head)
                // A validate that reads the body accepted it: what was read is the content.
                return try endpoint.content(from: head, context: context)
            }
            return try endpoint.content(from: response, context: context)
        } catch {
            response.body.cancel()
            if let error = error as? CatenaError { throw error }
            throw CatenaError(
                .decodingFailed, request: response.request, response: head, underlyingError: error,
                detail: "\(E.self) could not read the response")
        }
    }

    /// An event source that sends `endpoint`'s request through this client's chain,
    /// and reconnects after dropped connections (see ``EventSource``). The source has
    /// its own rules for the answer (200 and `text/event-stream`, 204 to stop), so
    /// the endpoint's `validate` is not used.
    public func eventSource<E: EventStreamEndpoint>(
        for endpoint: E, policy: ReconnectPolicy = ReconnectPolicy(), onReconnect: (@Sendable (Reconnection) -> Void)? = nil
    ) throws(CatenaError) -> EventSource {
        EventSource(try endpoint.buildRequest(), loader: loader, policy: policy, maxEventBytes: endpoint.maxEventBytes, onReconnect: onReconnect)
    }

    /// The head of `response` with up to 64 KiB of its body, read for at most 5 s.
    static func problem(of response: StreamedResponse) async -> APIResponse {
        let body = response.body
        let timer = Task {
            guard (try? await Task.sleep(for: .seconds(5))) != nil else { return }
            body.cancel()
        }
        defer { timer.cancel() }
        var head = response.head
        let limit = 64 << 10
        do {
            for try await chunk in body {
                head.body.append(chunk.prefix(limit - head.body.count))
                if head.body.count >= limit { break }
            }
        } catch {
            // What arrived before the failure is the problem body there is.
        }
        body.cancel()
        return head
    }
}
