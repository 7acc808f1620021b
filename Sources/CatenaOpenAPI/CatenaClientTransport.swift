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
        return .stream(length: length, contentType: contentType) {
            AsyncThrowingStream { continuation in
                let task = Task {
                    do {
                        for try await chunk in body { continuation.yield(Data(chunk)) }
                        continuation.finish()
                    } catch {
                        continuation.finish(throwing: error)
                    }
                }
                continuation.onTermination = { _ in task.cancel() }
            }
        }
    }
}

extension HTTPBody {
    /// A whole response's body; nil when there is none.
    convenience init?(_ response: APIResponse) {
        guard !response.body.isEmpty else { return nil }
        self.init(response.body)
    }

    /// A streamed response's body, read once, as it arrives; cancelling the reader
    /// cancels the stream. Its length is the server's Content-Length when that is one
    /// run of digits and the body was not encoded (a decoded body's length is unknown).
    convenience init(streaming streamed: StreamedResponse) {
        var length = HTTPBody.Length.unknown
        if streamed.headerFields[.contentEncoding] == nil, let text = streamed.headerFields[.contentLength],
            !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let value = Int64(text)
        {
            length = .known(value)
        }
        let body = streamed.body
        let stream = AsyncThrowingStream<HTTPBody.ByteChunk, any Error> { continuation in
            let task = Task {
                do throws(CatenaError) {
                    for try await chunk in body { continuation.yield(ArraySlice(chunk)) }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
        self.init(stream, length: length)
    }
}
#endif  // OpenAPI
