public import Foundation
public import HTTPTypes

/// An HTTP request as it travels down a loader chain: a value, so every loader can
/// change its own copy without affecting anyone else's.
///
/// The URL is kept in parts (scheme, host, port, percent-encoded path and query) and
/// only assembled by the transport. Build paths from components, which are
/// percent-encoded one by one, and never by string concatenation:
///
/// ```swift
/// let request = try APIRequest(.get, path: ["api", "users", "\(id)"],
///                              query: [URLQueryItem(name: "delay", value: "1")])
/// ```
///
/// A request without a host is relative: an ``EnvironmentMiddleware`` loader in the chain
/// supplies scheme, host, port and path prefix.
public struct APIRequest: Sendable {
    /// The HTTP method.
    public var method: HTTPRequest.Method
    /// "http" or "https"; `nil` until an environment supplies it.
    public var scheme: String?
    /// The host name or IP address (IPv6 without brackets); `nil` for a relative request.
    public var host: String?
    /// The port, or `nil` for the scheme's default.
    public var port: Int?
    /// The path as sent: percent-encoded, empty or starting with "/".
    public internal(set) var percentEncodedPath: String
    var query: [EncodedQueryItem]
    /// The header fields. swift-http-types rejects values that contain CR or LF.
    public var headerFields: HTTPFields
    /// The body, produced afresh for every attempt.
    public var body: Body
    /// Typed per-request options (see ``RequestOption``).
    public var options: RequestOptions

    /// A request for an absolute URL.
    ///
    /// User information in the URL (`https://user:pass@host/`) never stays in the URL:
    /// it becomes a Basic `Authorization` header, unless the request already has one.
    /// The fragment is dropped: it is never sent to a server. A `ws` or `wss` URL is read
    /// as `http` or `https`: a WebSocket opens with an HTTP request (see
    /// ``HTTPLoader/webSocket(_:options:)``).
    public init(_ method: HTTPRequest.Method = .get, url: URL, headerFields: HTTPFields = [:], body: Body = .empty) {
        self.init(blank: method, headerFields: headerFields, body: body)
        let components = URLComponents(url: url, resolvingAgainstBaseURL: true)
        self.scheme =
            switch components?.scheme?.lowercased() {
            case "ws": "http"
            case "wss": "https"
            case let scheme: scheme
            }
        // Foundation keeps the brackets of an IPv6 literal; the request stores the bare
        // address and the URL assembly adds them back.
        self.host = components?.host.flatMap { host in
            let bare = host.hasPrefix("[") && host.hasSuffix("]") && host.count >= 2 ? String(host.dropFirst().dropLast()) : host
            return bare.isEmpty ? nil : bare  // "https://[]" has no host
        }
        self.port = components?.port
        self.percentEncodedPath = components?.percentEncodedPath ?? ""
        self.query = components?.percentEncodedQuery.map(EncodedQueryItem.parse) ?? []
        if let user = components?.user, headerFields[.authorization] == nil {
            let pair = Data("\(user):\(components?.password ?? "")".utf8).base64EncodedString()
            self.headerFields[.authorization] = "Basic \(pair)"
        }
    }

    /// A request for an absolute URL given as text.
    ///
    /// - Throws: ``CatenaError/Code/invalidRequest`` when the text is not an absolute
    ///   http or https URL with a host; the error's detail says which part is wrong.
    public init(_ method: HTTPRequest.Method = .get, urlString: String, headerFields: HTTPFields = [:], body: Body = .empty) throws(CatenaError) {
        guard let url = URL(string: urlString) else {
            throw CatenaError(
                .invalidRequest, request: APIRequest(blank: method, headerFields: headerFields, body: body),
                detail: "\"\(Redaction.default.redact(urlString: urlString))\" is not a valid URL")
        }
        self.init(method, url: url, headerFields: headerFields, body: body)
        try validateAbsolute()
    }

    /// A relative request: path components and query items, no host. Put an
    /// ``EnvironmentMiddleware`` loader in the chain to say where it goes.
    ///
    /// - Throws: ``CatenaError/Code/invalidRequest`` naming a path component that is
    ///   empty, "." or "..": those would change the shape of the path.
    public init(
        _ method: HTTPRequest.Method = .get, path: [String], query: [URLQueryItem] = [], headerFields: HTTPFields = [:], body: Body = .empty
    ) throws(CatenaError) {
        self.init(blank: method, headerFields: headerFields, body: body)
        try appendPath(path)
        appendQueryItems(query)
    }

    /// For bridges from other HTTP libraries: a request to `origin`'s scheme, host, port
    /// and path (kept as a prefix), then `percentEncodedPathAndQuery` exactly as given
    /// ("/users/2?page=1"; a fragment is dropped). No URL is parsed: the OpenAPI
    /// transport makes one of these per call.
    package init(_ method: HTTPRequest.Method, origin: URL, percentEncodedPathAndQuery: String, headerFields: HTTPFields) {
        self.init(blank: method, headerFields: headerFields, body: .empty)
        scheme = origin.scheme?.lowercased()
        host = origin.host(percentEncoded: false).flatMap { host in
            let bare = host.hasPrefix("[") && host.hasSuffix("]") && host.count >= 2 ? String(host.dropFirst().dropLast()) : host
            return bare.isEmpty ? nil : bare
        }
        port = origin.port
        var prefix = origin.path(percentEncoded: true)
        if prefix.hasSuffix("/") { prefix.removeLast() }
        var rest = Substring(percentEncodedPathAndQuery)
        if let hash = rest.firstIndex(of: "#") { rest = rest[..<hash] }
        let questionMark = rest.firstIndex(of: "?")
        let path = questionMark.map { rest[..<$0] } ?? rest
        percentEncodedPath = prefix + (path.hasPrefix("/") ? path : "/" + path)
        if let questionMark { query = EncodedQueryItem.parse(String(rest[rest.index(after: questionMark)...])) }
    }

    /// A request to `path` below `baseURL` (whose own path is kept as a prefix).
    ///
    /// - Throws: ``CatenaError/Code/invalidRequest`` when the base URL is not absolute
    ///   http(s) with a host, or a path component is empty, "." or "..".
    public init(
        _ method: HTTPRequest.Method = .get, baseURL: URL, path: [String], query: [URLQueryItem] = [], headerFields: HTTPFields = [:], body: Body = .empty
    ) throws(CatenaError) {
        self.init(method, url: baseURL, headerFields: headerFields, body: body)
        try validateAbsolute()
        if percentEncodedPath.hasSuffix("/") { percentEncodedPath.removeLast() }
        try appendPath(path)
        appendQueryItems(query)
    }

    init(blank method: HTTPRequest.Method, headerFields: HTTPFields = [:], body: Body = .empty) {
        self.method = method
        self.headerFields = headerFields
        self.body = body
        self.options = RequestOptions()
        self.percentEncodedPath = ""
        self.query = []
    }

    // MARK: Path and query

    /// Appends path components, each percent-encoded on its own ("/" inside a
    /// component becomes "%2F").
    ///
    /// - Throws: ``CatenaError/Code/invalidRequest`` for an empty, "." or ".." component.
    public mutating func appendPath(_ components: [String]) throws(CatenaError) {
        for component in components {
            guard !component.isEmpty, component != ".", component != ".." else {
                throw CatenaError(
                    .invalidRequest, request: self,
                    detail: "path component \"\(component)\" is not allowed: empty, \".\" and \"..\" would change the shape of the path")
            }
            percentEncodedPath += "/" + PercentEncoding.encode(component, allowing: PercentEncoding.pathSegment)
        }
    }

    /// Ends the path with "/" (as in `/services/rest/`), unless it already does.
    public mutating func appendTrailingSlash() {
        if !percentEncodedPath.hasSuffix("/") { percentEncodedPath += "/" }
    }

    /// Puts an already percent-encoded path prefix (such as "/v2") in front of the path.
    mutating func prefixPath(percentEncoded prefix: String) {
        guard !prefix.isEmpty, prefix != "/" else { return }
        var prefix = prefix
        if !prefix.hasPrefix("/") { prefix = "/" + prefix }
        if prefix.hasSuffix("/") { prefix.removeLast() }
        percentEncodedPath = prefix + percentEncodedPath
    }

    /// The query items, decoded. Setting them replaces the whole query; each name and
    /// value is percent-encoded on its own, "+" and "&" included.
    public var queryItems: [URLQueryItem] {
        get { query.map { URLQueryItem(name: $0.decodedName, value: $0.decodedValue) } }
        set { query = newValue.map(EncodedQueryItem.init) }
    }

    /// Appends query items after those already present.
    public mutating func appendQueryItems(_ items: [URLQueryItem]) {
        query.append(contentsOf: items.map(EncodedQueryItem.init))
    }

    /// Whether the query has an item with this name.
    public func hasQueryItem(named name: String) -> Bool {
        query.contains { $0.decodedName == name }
    }

    /// The query as sent, or `nil` when there is none.
    public var percentEncodedQuery: String? {
        query.isEmpty ? nil : query.map(\.encoded).joined(separator: "&")
    }

    // MARK: Options

    /// Reads or sets a typed option (see ``RequestOption``).
    public subscript<Option: RequestOption>(option option: Option.Type) -> Option.Value {
        get { options[option] }
        set { options[option] = newValue }
    }

    /// The total time this request may take; `nil` uses the transport's timeout.
    public var timeout: Duration? {
        get { options[RequestTimeout.self] }
        set { options[RequestTimeout.self] = newValue }
    }

    // MARK: URL

    /// The absolute URL this request goes to, assembled from its parts.
    ///
    /// - Throws: ``CatenaError/Code/invalidRequest`` when there is no host (a relative
    ///   request that no environment completed), the scheme is not http or https, or
    ///   the host or port is invalid.
    public func urlString() throws(CatenaError) -> String {
        try validateAbsolute()
        return assembleURL(redacting: nil)
    }

    /// The absolute URL this request goes to; see ``urlString()``.
    public func url() throws(CatenaError) -> URL {
        let string = try urlString()
        guard let url = URL(string: string) else {
            throw CatenaError(.invalidRequest, request: self, detail: "the parts do not form a valid URL")
        }
        return url
    }

    func validateAbsolute() throws(CatenaError) {
        guard let host, !host.isEmpty else {
            throw CatenaError(.invalidRequest, request: self, detail: "no host: put an EnvironmentMiddleware loader in the chain or give an absolute URL")
        }
        guard let scheme, scheme == "http" || scheme == "https" else {
            throw CatenaError(.invalidRequest, request: self, detail: "scheme \(scheme.map { "\"\($0)\"" } ?? "missing"): only http and https are supported")
        }
        guard Self.isValidHost(host) else {
            throw CatenaError(.invalidRequest, request: self, detail: "host \"\(host)\" contains characters a host name cannot have")
        }
        if let port, !(1...65535).contains(port) {
            throw CatenaError(.invalidRequest, request: self, detail: "port \(port) is outside 1...65535")
        }
    }

    /// Whether `host` can go into a URL as it is: an IPv6 address (ASCII hex digits, ":"
    /// and "." only), or a name without whitespace, controls or a character that would end
    /// or change the URL's authority. Checked on every call a transport sends, so on the
    /// host's bytes; only a name with non-ASCII letters takes the slower walk over its
    /// scalars, which also knows Unicode's whitespace.
    static func isValidHost(_ host: String) -> Bool {
        let bytes = host.utf8
        if bytes.contains(UInt8(ascii: ":")) {
            return bytes.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"), UInt8(ascii: "A")...UInt8(ascii: "F"),
                    UInt8(ascii: ":"), UInt8(ascii: "."):
                    true
                default: false
                }
            }
        }
        var ascii = true
        for byte in bytes {
            guard byte < 0x80 else {
                ascii = false
                continue
            }
            guard isAllowedInHostName(byte) else { return false }
        }
        if ascii { return true }
        return host.unicodeScalars.allSatisfy { scalar in
            scalar.isASCII ? isAllowedInHostName(UInt8(scalar.value)) : !scalar.properties.isWhitespace
        }
    }

    /// An ASCII byte a host name may have: printable, and none of the characters that delimit
    /// or escape a URL's parts (listed below).
    private static func isAllowedInHostName(_ byte: UInt8) -> Bool {
        guard byte > 0x20, byte < 0x7F else { return false }
        switch byte {
        case UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "#"), UInt8(ascii: "@"), UInt8(ascii: "\\"), UInt8(ascii: "<"),
            UInt8(ascii: ">"), UInt8(ascii: "\""), UInt8(ascii: "{"), UInt8(ascii: "}"), UInt8(ascii: "|"), UInt8(ascii: "^"),
            UInt8(ascii: "`"), UInt8(ascii: "%"), UInt8(ascii: "["), UInt8(ascii: "]"), UInt8(ascii: ":"):
            return false
        default:
            return true
        }
    }

    /// The URL as text. With a redaction, the values of secret query items are hidden;
    /// parts that are missing are left out, so this also works for relative requests.
    package func assembleURL(redacting redaction: Redaction?) -> String {
        // Assembled in one buffer of the exact size, for every call a transport sends:
        // appended piece by piece, the pieces' checks and copies of optionals cost more
        // than the bytes.
        let queryText =
            query.isEmpty
            ? nil
            : query.map { item in
                guard let redaction, item.value != nil, redaction.isSecretQueryItem(item.decodedName) else { return item.encoded }
                return item.name + "=" + Redaction.placeholder
            }.joined(separator: "&")
        let scheme = host == nil ? "" : self.scheme ?? "?"
        let bracketed = host?.utf8.contains(UInt8(ascii: ":")) == true
        let portText = host == nil ? nil : port.map { String($0) }
        let path = percentEncodedPath.isEmpty && host != nil ? "/" : percentEncodedPath
        var length = path.utf8.count
        if let host { length += scheme.utf8.count + 3 + host.utf8.count + (bracketed ? 2 : 0) + (portText.map { $0.utf8.count + 1 } ?? 0) }
        if let queryText { length += 1 + queryText.utf8.count }
        return String(unsafeUninitializedCapacity: length) { buffer in
            var end = 0
            func put(_ text: String) {
                for byte in text.utf8 {
                    buffer[end] = byte
                    end += 1
                }
            }
            func put(_ byte: UInt8) {
                buffer[end] = byte
                end += 1
            }
            if let host {
                put(scheme)
                put("://")
                if bracketed { put(UInt8(ascii: "[")) }
                put(host)
                if bracketed { put(UInt8(ascii: "]")) }
                if let portText {
                    put(UInt8(ascii: ":"))
                    put(portText)
                }
            }
            put(path)
            if let queryText {
                put(UInt8(ascii: "?"))
                put(queryText)
            }
            // `buffer`'s subscript is checked in debug builds only: the length above must
            // count exactly what is written here.
            assert(end == length, "assembleURL wrote \(end) bytes into \(length)")
            return end
        }
    }
}

extension APIRequest {
    /// The URL as text with the values of secret query items hidden (those the
    /// request's ``Redaction`` option and ``Redaction/default`` name): for logs,
    /// traces and metrics. Parts that are missing are left out, so this also works
    /// for a relative request.
    public var redactedURLString: String {
        assembleURL(redacting: Redaction.effective(for: self))
    }
}

extension APIRequest: CustomStringConvertible {
    /// "GET https://host/path?query", with the values of the query items its
    /// ``Redaction`` option names hidden.
    public var description: String {
        "\(method.rawValue) \(assembleURL(redacting: Redaction.effective(for: self)))"
    }
}

/// One query item, kept percent-encoded exactly as it will be sent.
struct EncodedQueryItem: Sendable, Hashable {
    var name: String
    var value: String?

    init(_ item: URLQueryItem) {
        name = PercentEncoding.encode(item.name, allowing: PercentEncoding.queryComponent)
        value = item.value.map { PercentEncoding.encode($0, allowing: PercentEncoding.queryComponent) }
    }

    private init(encodedName: Substring, encodedValue: Substring?) {
        name = String(encodedName)
        value = encodedValue.map(String.init)
    }

    /// Splits a raw query on "&" without re-encoding, so a URL's query is sent as given.
    static func parse(_ query: String) -> [EncodedQueryItem] {
        query.split(separator: "&", omittingEmptySubsequences: true).map { pair in
            if let equals = pair.firstIndex(of: "=") {
                return EncodedQueryItem(encodedName: pair[..<equals], encodedValue: pair[pair.index(after: equals)...])
            }
            return EncodedQueryItem(encodedName: pair, encodedValue: nil)
        }
    }

    var encoded: String { value.map { "\(name)=\($0)" } ?? name }
    var decodedName: String { PercentEncoding.decode(name[...]) ?? name }
    var decodedValue: String? { value.map { PercentEncoding.decode($0[...]) ?? $0 } }
}
