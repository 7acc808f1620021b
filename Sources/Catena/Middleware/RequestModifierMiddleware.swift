/// Changes every request with a closure before handing it on: add a header, sign it,
/// rewrite a path.
///
/// ```swift
/// let chain = RequestModifierMiddleware { $0.headerFields[.userAgent] = "MyApp/1.0" } --> transport
/// ```
///
/// An error thrown by the closure fails the request with
/// ``CatenaError/Code/invalidRequest`` (a ``CatenaError`` passes through unchanged);
/// the request is not sent.
public struct RequestModifierMiddleware: HTTPMiddleware {
    private let modify: @Sendable (inout APIRequest) async throws -> Void

    /// A loader that runs `modify` on each request.
    public init(_ modify: @escaping @Sendable (inout APIRequest) async throws -> Void) {
        self.modify = modify
    }

    public func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        var modified = request
        do {
            try await modify(&modified)
        } catch {
            throw CatenaError.wrapping(error, request: request, code: .invalidRequest, detail: "RequestModifierMiddleware's closure failed")
        }
        return try await next.load(modified)
    }
}
