import Foundation
import HTTPTypes

/// Fails a request that has no host yet: a loader that keys or guards by origin cannot
/// work above EnvironmentMiddleware, and saying so beats silently doing nothing.
func requireAbsolute(_ request: APIRequest, loader: String) throws(CatenaError) {
    guard request.host == nil else { return }
    throw CatenaError(
        .invalidRequest, request: request,
        detail: "\(loader) got a request without a host: put it after EnvironmentMiddleware in the chain")
}

/// Sends relative requests to a ``ServerEnvironment``; a request whose
/// ``ServerEnvironment`` option is set goes to that one instead.
public struct EnvironmentMiddleware: HTTPMiddleware {
    /// The environment requests go to unless they name their own.
    public let environment: ServerEnvironment

    /// A loader that sends relative requests to `environment`.
    public init(_ environment: ServerEnvironment) {
        self.environment = environment
    }

    public func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        try await next.load(applied(to: request))
    }

    /// `request` sent to its environment. `@inline(never)`, so its temporaries take no
    /// room in `load`'s async frame (Architecture: "Async frames stay small").
    @inline(never)
    private func applied(to request: APIRequest) -> APIRequest {
        var request = request
        (request[option: ServerEnvironment.self] ?? environment).apply(to: &request)
        return request
    }
}
