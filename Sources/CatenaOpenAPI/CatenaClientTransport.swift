#if OpenAPI
public import Catena
public import Foundation
public import HTTPTypes
public import OpenAPIRuntime

/// Sends a swift-openapi-generator client's requests through a Catena loader chain, so a
/// generated client gets retry, auth, caching, throttling, tracing and the rest:
///
/// ```swift
/// let chain = RetryMiddleware() --> TokenAuthMiddleware(hosts: ["api.example.com"], refresh: refresh)
///     --> CacheMiddleware() --> AsyncHTTPClientTransport()
/// let client = Client(serverURL: try Servers.Server1.url(), transport: CatenaClientTransport(chain))
/// ```
///
/// - **Requests**: the generated request goes to `baseURL` + its path, with its header
///   fields. A body of known length up to ``bufferedBodyLimit`` is collected once and can
///   be sent again (so `RetryMiddleware` and `TokenAuthMiddleware` may resend it); a larger or unknown
///   one is streamed (where the transport streams: AsyncHTTPClient) and can be sent once.
/// - **Responses** are loaded whole (`CacheMiddleware` and `DeduplicationMiddleware` work, the body is
///   bounded by `MaximumResponseSize`), except for the operations in
///   `streamedOperations`, whose bodies arrive as they come (event streams, downloads).
/// - **Errors**: a failure is thrown as the chain's `CatenaError`; the generated
///   client wraps it in its `ClientError`, and ``Swift/Error/catenaError`` finds it
///   again. A status such as 404 is a response, as the generated client expects.
///
/// Each request carries its operation's ID as the ``OpenAPIOperationID`` option, for
/// middleware that wants to know which operation it serves.
public struct CatenaClientTransport: ClientTransport {
    private let loader: any HTTPLoader
    private let streamedOperations: Set<String>
    /// The largest request body of known length that is collected, and so can be sent
    /// again; 1 MiB.
    public static let bufferedBodyLimit = 1 << 20

    /// A transport that sends through `loader`.
    ///
    /// - Parameters:
    ///   - loader: the chain every request goes through, ending in a transport.
    ///   - streamedOperations: the IDs of the operations whose response bodies are
    ///     streamed instead of loaded whole.
    public init(_ loader: some HTTPLoader, streamedOperations: Set<String> = []) {
        self.loader = loader
        self.streamedOperations = streamedOperations
    }

    public func send(_ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String) async throws -> (HTTPResponse, HTTPBody?) {
        var outgoing = try await APIRequest(openAPI: request, body: body, baseURL: baseURL)
        outgoing[option: OpenAPIOperationID.self] = operationID
        if streamedOperations.contains(operationID) {
            let streamed = try await loader.stream(outgoing)
            return (HTTPResponse(status: streamed.status, headerFields: streamed.headerFields), HTTPBody(streaming: streamed))
        }
        let response = try await loader.load(outgoing)
        return (HTTPResponse(status: response.status, headerFields: response.headerFields), HTTPBody(response))
    }
}

/// The OpenAPI operation a request was made for (its `operationId`), set by
/// ``CatenaClientTransport``; nil for requests made otherwise.
public enum OpenAPIOperationID: RequestOption {
    public static let defaultValue: String? = nil
}

extension Error {
    /// The `CatenaError` behind this error: itself, or what an OpenAPI `ClientError`
    /// wraps. So a caller of a generated client still finds the code (`timedOut`,
    /// `cannotConnect`, …).
    public var catenaError: CatenaError? {
        if let error = self as? CatenaError { return error }
        if let error = self as? ClientError { return error.underlyingError.catenaError }
        return nil
    }
}

extension APIRequest {
    /// The generated request, with its body, sent to `baseURL` + its path.
    init(openAPI request: HTTPRequest, body: HTTPBody?, baseURL: URL) async throws(CatenaError) {
        self.init(request.method, origin: baseURL, percentEncodedPathAndQuery: request.path ?? "/", headerFields: request.headerFields)
        self.body = try await .openAPI(body, for: self)
    }
}

extension APIRequest.Body {
    /// A generated request body: collected when it is small and of known length (so it
    /// can be sent again), streamed otherwise.
    static func openAPI(_ body: HTTPBody?, for request: APIRequest) async throws(CatenaError) -> APIRequest.Body {
        guard let body else { return .empty }
        let contentType = "application/octet-stream"  // the generated request carries its own Content-Type
        if case .known(let length) = body.length, length <= CatenaClientTransport.bufferedBodyLimit {
            do {
                return .data(try await Data(collecting: body, upTo: Int(length)), contentType: contentType)
            } catch {
                throw CatenaError(.invalidRequest, request: request, underlyingError: error, detail: "the OpenAPI request body could not be read")
            }
        }
        let length: Int64? = if case .known(let length) = body.length { length } else { nil }
        // Pulled as the transport sends: nothing is read from `body` before there is
        // room to send it, so a slow upload holds no more than a chunk.
        return .stream(length: length, contentType: contentType) {
            let chunks = PulledChunks(body.makeAsyncIterator())
            return AsyncThrowingStream { try await chunks.next() }
        }
    }
}

/// An `HTTPBody`'s iterator behind a reference, for the closure that pulls from it.
// @unchecked Sendable: an `AsyncThrowingStream(unfolding:)` calls its closure for one
// consumer, one call at a time, so the iterator is never used from two places at once.
private final class PulledChunks: @unchecked Sendable {
    private var iterator: HTTPBody.Iterator

    init(_ iterator: HTTPBody.Iterator) {
        self.iterator = iterator
    }

    func next() async throws -> Data? {
        try await iterator.next().map { Data($0) }
    }
}

/// A streamed response's body as `HTTPBody` chunks, read from the transport as the
/// generated client asks for them: the body's window and idle timeout apply.
private struct ResponseChunks: AsyncSequence, Sendable {
    typealias Element = HTTPBody.ByteChunk
    let body: ResponseBody

    struct AsyncIterator: AsyncIteratorProtocol {
        var base: ResponseBody.AsyncIterator

        mutating func next() async throws -> HTTPBody.ByteChunk? {
            try await base.next().map { ArraySlice($0) }
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: body.makeAsyncIterator())
    }
}

extension HTTPBody {
    /// A whole response's body; nil when there is none.
    convenience init?(_ response: APIResponse) {
        guard !response.body.isEmpty else { return nil }
        self.init(response.body)
    }

    /// A streamed response's body, read once, pulled from the transport as it is read;
    /// cancelling the reader, or dropping the body unread, cancels the stream. Its length is the server's Content-Length when that is one
    /// run of digits and the body was not encoded (a decoded body's length is unknown).
    convenience init(streaming streamed: StreamedResponse) {
        var length = HTTPBody.Length.unknown
        if streamed.headerFields[.contentEncoding] == nil, let text = streamed.headerFields[.contentLength],
            !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let value = Int64(text)
        {
            length = .known(value)
        }
        self.init(ResponseChunks(body: streamed.body), length: length, iterationBehavior: .single)
    }
}
#endif  // OpenAPI
