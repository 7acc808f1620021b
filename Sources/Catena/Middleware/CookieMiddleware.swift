import Foundation
import HTTPTypes

/// Keeps the cookies servers set and sends them back (RFC 6265), opt-in:
///
/// ```swift
/// let chain = EnvironmentMiddleware(environment) --> CookieMiddleware() --> AsyncHTTPClientTransport()
/// ```
///
/// Put it below ``EnvironmentMiddleware``: it needs the request's host, and a request without
/// one fails with ``CatenaError/Code/invalidRequest`` saying so. A `Cookie` field the
/// request already has is kept, the jar's cookies after it. Cookies set by a redirect
/// the transport follows are not seen (the transports follow redirects below the
/// chain). `reset()` empties the jar.
public struct CookieMiddleware: HTTPMiddleware {
    /// The cookies kept.
    public let jar: CookieJar

    /// A middleware keeping cookies in `jar` (a new, empty one by default).
    public init(jar: CookieJar = CookieJar()) {
        self.jar = jar
    }

    public func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        let request = try withCookies(request)
        do {
            let response = try await next.load(request)
            jar.store(response)
            return response
        } catch {
            // An unacceptable status still carries a response whose cookies count.
            if let response = error.response { jar.store(response) }
            throw error
        }
    }

    public func stream(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> StreamedResponse {
        let response = try await next.stream(try withCookies(request))
        jar.store(response.headerFields, for: response.request)
        return response
    }

    public func reset() async {
        jar.removeAll()
    }

    private func withCookies(_ request: APIRequest) throws(CatenaError) -> APIRequest {
        guard request.host != nil else {
            throw CatenaError(
                .invalidRequest, request: request,
                detail: "CookieMiddleware needs the request's host: put it below EnvironmentMiddleware in the chain")
        }
        guard let field = jar.cookieField(for: request) else { return request }
        var request = request
        if let own = request.headerFields[.cookie], !own.isEmpty {
            request.headerFields[.cookie] = own + "; " + field
        } else {
            request.headerFields[.cookie] = field
        }
        return request
    }
}
