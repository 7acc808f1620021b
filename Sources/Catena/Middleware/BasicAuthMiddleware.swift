import Foundation
import HTTPTypes

/// Adds HTTP Basic authentication to requests for the configured origins.
///
/// Credentials come from the request's ``BasicCredentials`` option, else from the
/// provider. Requests to other origins, and requests that already carry an
/// `Authorization` header, pass through untouched.
///
/// `hosts` entries are `"host"` or `"host:port"`; a bare host means the scheme's
/// default port. Credentials go over https, or over plain http to a loopback host;
/// a request to a configured host over http elsewhere, or on a port no entry names,
/// fails with ``CatenaError/Code/invalidRequest`` (unless `allowHTTP` is true, for
/// the first).
public struct BasicAuthMiddleware: HTTPMiddleware {
    /// The origins (lowercased `"host"` or `"host:port"`) that may receive the credentials.
    public let hosts: Set<String>
    private let scope: CredentialScope
    private let provider: @Sendable (APIRequest) async throws -> BasicCredentials?

    /// Sends `credentials` to `hosts`.
    public init(hosts: Set<String>, allowHTTP: Bool = false, credentials: BasicCredentials) {
        self.init(hosts: hosts, allowHTTP: allowHTTP) { _ in credentials }
    }

    /// Asks `provider` for credentials for each request to `hosts`; nil sends none.
    public init(hosts: Set<String>, allowHTTP: Bool = false, provider: @escaping @Sendable (APIRequest) async throws -> BasicCredentials?) {
        self.hosts = Set(hosts.map { $0.lowercased() })
        self.scope = CredentialScope(hosts, allowsHTTP: allowHTTP)
        self.provider = provider
    }

    public func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        guard case .send = try scope.decide(request, loader: "BasicAuthMiddleware"), request.headerFields[.authorization] == nil else {
            return try await next.load(request)
        }
        let credentials: BasicCredentials?
        if let option = request[option: BasicCredentials.self] {
            credentials = option
        } else {
            do {
                credentials = try await provider(request)
            } catch {
                throw CatenaError.wrapping(error, request: request, code: .authenticationFailed, detail: "the credentials provider failed")
            }
        }
        var request = request
        if let credentials { request.headerFields[.authorization] = credentials.headerValue }
        return try await next.load(request)
    }
}
