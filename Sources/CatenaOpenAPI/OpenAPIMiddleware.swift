#if OpenAPI
public import Catena
import Foundation
import HTTPTypes
public import OpenAPIRuntime

/// Runs a swift-openapi-runtime `ClientMiddleware` as a link in a Catena chain, so
/// middleware written for generated clients (auth, logging, headers) serves any
/// Catena request too:
///
/// ```swift
/// let chain = EnvironmentMiddleware(environment) --> OpenAPIMiddleware(UserAgentMiddleware())
///     --> AsyncHTTPClientTransport()
/// ```
///
/// Place it after `EnvironmentMiddleware`: the middleware sees absolute requests (its
/// `baseURL` is the request's scheme, host and port; its request's path the rest). The
/// request's body reaches the middleware as an `HTTPBody` read only if the middleware
/// reads it; a body the middleware passes on unchanged goes down the chain as it was
/// (so it can still be sent again). The request's options travel on whatever the
/// middleware does to the request. A middleware that calls `next` several times sends
/// the request several times. A failure the middleware throws that is not a
/// `CatenaError` becomes one with code `CatenaError/Code/unknown` naming the
/// middleware's type.
public struct OpenAPIMiddleware<Middleware: ClientMiddleware>: HTTPMiddleware {
    /// The middleware this link runs.
    public let middleware: Middleware

    /// A link that runs `middleware`.
    public init(_ middleware: Middleware) {
        self.middleware = middleware
    }

    public func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        let address = try request.urlString()  // also refuses a relative request
        guard let components = URLComponents(string: address), let baseURL = Self.origin(of: components) else {
            throw CatenaError(.invalidRequest, request: request, detail: "the request's URL has no origin for an OpenAPI middleware")
        }
        let path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        let head = HTTPRequest(
            method: request.method, scheme: components.scheme, authority: nil,
            path: path + (components.percentEncodedQuery.map { "?" + $0 } ?? ""),
            headerFields: request.headerFields)
        let body = request.body.isEmpty ? nil : HTTPBody(producing: request)
        let responseBodies = ResponseBodies()
        let answer: (HTTPResponse, HTTPBody?)
        do {
            answer = try await middleware.intercept(head, body: body, baseURL: baseURL, operationID: request[option: OpenAPIOperationID.self] ?? "") {
                newHead, newBody, newBaseURL in
                var forward = try await APIRequest(openAPI: newHead, body: nil, baseURL: newBaseURL)
                forward.options = request.options
                if let newBody, newBody !== body {
                    forward.body = try await .openAPI(newBody, for: forward)
                } else {
                    forward.body = newBody == nil ? .empty : request.body  // dropped, or passed on unchanged
                }
                let response = try await next.load(forward)
                let answerBody = HTTPBody(response)
                if let answerBody { responseBodies.keep(answerBody, response.body) }
                return (HTTPResponse(status: response.status, headerFields: response.headerFields), answerBody)
            }
        } catch {
            if let catenaError = error.catenaError { throw catenaError }
            throw CatenaError(.unknown, request: request, underlyingError: error, detail: "the OpenAPI middleware \(Middleware.self) failed")
        }
        let (response, responseBody) = answer
        let data: Data
        if let responseBody {
            if let kept = responseBodies.data(for: responseBody) {
                data = kept
            } else {
                do {
                    data = try await Data(collecting: responseBody, upTo: request[option: MaximumResponseSize.self])
                } catch {
                    throw CatenaError(
                        .invalidResponse, request: request, underlyingError: error,
                        detail: "the body the OpenAPI middleware \(Middleware.self) returned could not be read within the response size limit")
                }
            }
        } else {
            data = Data()
        }
        return APIResponse(status: response.status, headerFields: response.headerFields, body: data, request: request)
    }

    /// "scheme://host:port" of a URL, as the base URL a middleware sees.
    private static func origin(of components: URLComponents) -> URL? {
        var origin = URLComponents()
        origin.scheme = components.scheme
        origin.percentEncodedHost = components.percentEncodedHost
        origin.port = components.port
        return origin.url
    }
}

/// The bodies handed to the middleware as responses, with their bytes, so a body it
/// returns unchanged is not collected again. Behind a lock: `next` may run on any task.
private final class ResponseBodies: Sendable {
    private let bodies = Locked<[(HTTPBody, Data)]>([])
    func keep(_ body: HTTPBody, _ data: Data) { bodies.withLock { $0.append((body, data)) } }
    func data(for body: HTTPBody) -> Data? { bodies.withLock { $0.first { $0.0 === body }?.1 } }
}

extension HTTPBody {
    /// `request`'s body, produced only when read.
    convenience init(producing request: APIRequest) {
        let stream = AsyncThrowingStream<HTTPBody.ByteChunk, any Error> { continuation in
            let task = Task {
                do {
                    if let data = try await request.body.makeData() { continuation.yield(ArraySlice(data)) }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
        self.init(stream, length: .unknown)
    }
}
#endif  // OpenAPI
