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
    /// Header fields added to each request that does not already set them. Their
    /// values are redacted in logs and errors and never follow a redirect elsewhere.
    public var headerFields: HTTPFields {
        didSet { secrets = Self.secrets(headerFields, queryItems) }
    }
    /// Query items added to each request that does not already have one of that name.
    /// Their values are redacted in logs and errors.
    public var queryItems: [URLQueryItem] {
        didSet { secrets = Self.secrets(headerFields, queryItems) }
    }
    /// The names injected, as a redaction; nil when there are none.
    private var secrets: Redaction?
    /// A Unix domain socket every request to this environment goes over instead of TCP
    /// (see ``UnixSocket``); nil for TCP.
    public var unixSocketPath: String?

    private static func secrets(_ headerFields: HTTPFields, _ queryItems: [URLQueryItem]) -> Redaction? {
        guard !headerFields.isEmpty || !queryItems.isEmpty else { return nil }
        return Redaction(headerNames: Set(headerFields.map(\.name)), queryNames: Set(queryItems.map(\.name)))
    }

    /// An environment from its parts.
    public init(
        scheme: String = "https", host: String, port: Int? = nil, pathPrefix: String = "", headerFields: HTTPFields = [:], queryItems: [URLQueryItem] = [],
        unixSocketPath: String? = nil
    ) {
        self.scheme = scheme.lowercased()
        self.unixSocketPath = unixSocketPath
        self.host = host
        self.port = port
        self.pathPrefix = pathPrefix
        self.headerFields = headerFields
        self.queryItems = queryItems
        self.secrets = Self.secrets(headerFields, queryItems)
    }

    /// An environment from a base URL such as `http://127.0.0.1:8080/api`; the URL's
    /// path becomes the prefix. Nothing in the URL is dropped: its query items join
    /// `queryItems` (those given by name win), and user information
    /// (`https://user:password@host/`) becomes an `Authorization: Basic` header, as curl
    /// does, unless `headerFields` sets `Authorization`. Returns nil when the URL has
    /// no host, its scheme is not http or https, its user info is not valid
    /// percent-encoding, or it carries user info over plain http to a host that is not
    /// loopback (a password in clear text).
    public init?(baseURL: URL, headerFields: HTTPFields = [:], queryItems: [URLQueryItem] = []) {
        let parsed = APIRequest(url: baseURL)
        guard let host = parsed.host, let scheme = parsed.scheme, scheme == "http" || scheme == "https" else { return nil }
        var headerFields = headerFields
        let components = URLComponents(url: baseURL, resolvingAgainstBaseURL: false)
        if let encodedUser = components?.percentEncodedUser {
            guard let user = components?.user, components?.percentEncodedPassword == nil || components?.password != nil,
                !encodedUser.isEmpty || components?.percentEncodedPassword != nil,
                scheme == "https" || CredentialScope.isLoopback(host.lowercased())
            else { return nil }
            if headerFields[.authorization] == nil {
                headerFields[.authorization] = BasicCredentials(user: user, password: components?.password ?? "").headerValue
            }
        }
        let given = Set(queryItems.map(\.name))
        let fromURL = parsed.queryItems.filter { !given.contains($0.name) }
        self.init(
            scheme: scheme, host: host, port: parsed.port, pathPrefix: parsed.percentEncodedPath,
            headerFields: headerFields, queryItems: fromURL + queryItems)
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
        if let unixSocketPath, request[option: UnixSocket.self] == nil { request[option: UnixSocket.self] = unixSocketPath }
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
        secrets?.added(to: &request)
    }
}
