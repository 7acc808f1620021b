public import Foundation
public import HTTPTypes

/// Where requests go: scheme, host, port, a path prefix, and header fields and query
/// items that every request to that server carries (an API key, a version).
///
/// It is also a ``RequestOption``: a request that sets it goes to that environment
/// instead of the chain's (staging for one call, say).
public struct ServerEnvironment: Sendable, RequestOption {
    public var scheme: String
    public var host: String
    public var port: Int?
    /// Percent-encoded path put in front of every request's path, such as "/v2".
    public var pathPrefix: String
    /// Header fields added to each request that does not already set them.
    public var headerFields: HTTPFields
    /// Query items added to each request that does not already have one of that name.
    public var queryItems: [URLQueryItem]

    /// An environment from its parts.
    public init(scheme: String = "https", host: String, port: Int? = nil, pathPrefix: String = "", headerFields: HTTPFields = [:], queryItems: [URLQueryItem] = []) {
        self.scheme = scheme.lowercased()
        self.host = host
        self.port = port
        self.pathPrefix = pathPrefix
        self.headerFields = headerFields
        self.queryItems = queryItems
    }

    /// An environment from a base URL such as `http://127.0.0.1:8080/api`; the URL's
    /// path becomes the prefix. Returns nil when the URL has no host or its scheme is
    /// not http or https.
    public init?(baseURL: URL, headerFields: HTTPFields = [:], queryItems: [URLQueryItem] = []) {
        let parsed = APIRequest(url: baseURL)
        guard let host = parsed.host, let scheme = parsed.scheme, scheme == "http" || scheme == "https" else { return nil }
        self.init(scheme: scheme, host: host, port: parsed.port, pathPrefix: parsed.percentEncodedPath,
                  headerFields: headerFields, queryItems: queryItems)
    }

    /// The environment as a request option; `nil` (the default) means "the chain's".
    public static let defaultValue: ServerEnvironment? = nil

    /// Completes `request` for this server.
    ///
    /// A relative request (no host) gets everything: scheme, host, port, path prefix,
    /// headers and query items. An absolute request to this same server gets only the
    /// headers and query items; one to any other host is left untouched, so an API key
    /// in the environment never leaks to another server.
    func apply(to request: inout APIRequest) {
        if request.host == nil {
            request.scheme = scheme
            request.host = host
            request.port = port
            request.prefixPath(percentEncoded: pathPrefix)
        } else if request.host?.lowercased() != host.lowercased() || request.scheme != scheme || request.port != port {
            return
        }
        var added: [HTTPField.Name] = []
        for field in headerFields where request.headerFields[field.name] == nil {
            request.headerFields.append(field)
            added.append(field.name)
        }
        // Never sent to another origin, should a redirect lead there.
        if !added.isEmpty { request[option: OriginBoundHeaders.self].formUnion(added) }
        for item in queryItems where !request.hasQueryItem(named: item.name) {
            request.appendQueryItems([item])
        }
    }
}

/// Sends relative requests to a ``ServerEnvironment``; a request whose
/// ``ServerEnvironment`` option is set goes to that one instead.
public struct ApplyEnvironment: HTTPMiddleware {
    /// The environment requests go to unless they name their own.
    public let environment: ServerEnvironment

    /// A loader that sends relative requests to `environment`.
    public init(_ environment: ServerEnvironment) {
        self.environment = environment
    }

    public func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        var request = request
        (request[option: ServerEnvironment.self] ?? environment).apply(to: &request)
        return try await next.load(request)
    }
}
