import Foundation

/// What a ``ValidationMiddleware`` loader accepts, per chain and, as a ``RequestOption``, per request.
public struct Acceptance: Sendable, RequestOption {
    /// Status codes that pass.
    public var statuses: Set<Int>
    /// Media types that pass (compared without parameters, case-insensitively), or
    /// `nil` for any. A response without a body passes whatever its Content-Type.
    public var contentTypes: Set<String>?

    /// Accepts `statuses` and, when given, only these media types ("application/json").
    public init(statuses: some Sequence<Int> = 200..<300, contentTypes: Set<String>? = nil) {
        self.statuses = Set(statuses)
        self.contentTypes = contentTypes.map { Set($0.map { $0.lowercased() }) }
    }

    /// The option's default: `nil`, meaning "the chain's".
    public static let defaultValue: Acceptance? = nil
}

/// Fails responses whose status or content type is not acceptable.
///
/// An unacceptable status throws ``CatenaError/Code/unacceptableStatus``; an
/// unacceptable content type throws ``CatenaError/Code/invalidResponse`` naming it. Both
/// carry the response. A request whose ``Acceptance`` option is set is judged by that
/// instead of the chain's.
///
/// ```swift
/// let chain = ValidationMiddleware(Acceptance(statuses: 200..<300, contentTypes: ["application/json"])) --> transport
/// ```
public struct ValidationMiddleware: HTTPMiddleware {
    /// What the chain accepts.
    public let acceptance: Acceptance

    /// A loader that accepts `acceptance` (2xx with any content type by default).
    public init(_ acceptance: Acceptance = Acceptance()) {
        self.acceptance = acceptance
    }

    public func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        let response = try await next.load(request)
        // A WebSocket's upgrade succeeds with 101 and no content: HTTPLoader.webSocket checks the rest.
        if response.status.code == 101, request.isWebSocketUpgrade { return response }
        let acceptance = request[option: Acceptance.self] ?? self.acceptance
        guard acceptance.statuses.contains(response.status.code) else {
            throw CatenaError(.unacceptableStatus, request: request, response: response)
        }
        // A stream's head has an empty body and a content type all the same.
        let isStreamHead = response.request[option: StreamHeadID.self] != nil
        if let types = acceptance.contentTypes, !response.body.isEmpty || isStreamHead {
            if let mismatch = response.headerFields.contentTypeMismatch(expecting: types) {
                throw CatenaError(.invalidResponse, request: request, response: response, detail: mismatch)
            }
        }
        return response
    }
}
