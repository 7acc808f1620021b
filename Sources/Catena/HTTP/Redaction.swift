public import HTTPTypes

/// Which header fields and query items are secret. Logs and error descriptions print
/// `<redacted>` in place of their values, and a redirect to another origin drops the
/// secret headers.
///
/// Also a ``RequestOption``: the request's redaction is what its description (and so
/// every ``CatenaError``'s) hides. ``LogMiddleware`` adds its own redaction to the
/// requests it passes on, and ``EnvironmentMiddleware`` adds the names of the headers and
/// query items it injects, so an error thrown below them hides the same values.
public struct Redaction: Sendable, Equatable, RequestOption {
    /// What a secret value is printed as.
    public static let placeholder = "<redacted>"

    /// Header fields whose values are never printed.
    public var headerNames: Set<HTTPField.Name>
    /// Query item names (compared case-insensitively) whose values are never printed.
    public var queryNames: Set<String>

    /// The headers that carry credentials (Authorization, Proxy-Authorization, Cookie,
    /// Set-Cookie, and the API-key and token headers APIs commonly use) and the query
    /// names APIs commonly use for keys and tokens.
    public static let `default` = Redaction(
        headerNames: Set([HTTPField.Name.authorization, .proxyAuthorization, .cookie, .setCookie] + commonSecretHeaders),
        queryNames: [
            "access_token", "api_key", "apikey", "api-key", "auth", "client_secret", "code", "key",
            "password", "refresh_token", "secret", "sig", "signature", "token",
        ]
    )

    /// Header names that APIs commonly use for keys and tokens.
    static let commonSecretHeaders: [HTTPField.Name] = [
        "X-Api-Key", "Api-Key", "X-API-Token", "X-Auth-Token", "X-Access-Token", "X-Amz-Security-Token",
        "X-Goog-Api-Key", "X-Csrf-Token", "X-Xsrf-Token", "Ocp-Apim-Subscription-Key",
    ].compactMap { HTTPField.Name($0) }

    /// A redaction with exactly these names.
    public init(headerNames: Set<HTTPField.Name>, queryNames: Set<String>) {
        self.headerNames = headerNames
        self.queryNames = Set(queryNames.map { $0.lowercased() })
    }

    /// The default redaction plus these names.
    public static func adding(headers: [HTTPField.Name] = [], queryItems: [String] = []) -> Redaction {
        Redaction(
            headerNames: Redaction.default.headerNames.union(headers),
            queryNames: Redaction.default.queryNames.union(queryItems))
    }

    /// The option's value until a loader or the caller sets one: ``default``.
    public static var defaultValue: Redaction { .default }

    /// Everything either redaction hides.
    public func union(_ other: Redaction) -> Redaction {
        Redaction(headerNames: headerNames.union(other.headerNames), queryNames: queryNames.union(other.queryNames))
    }

    /// Whether this hides everything `other` hides.
    func covers(_ other: Redaction) -> Bool {
        headerNames.isSuperset(of: other.headerNames) && queryNames.isSuperset(of: other.queryNames)
    }

    /// What `request`'s description and logs hide: its ``Redaction`` option, which
    /// never hides less than ``default`` whatever it was set to.
    package static func effective(for request: APIRequest) -> Redaction {
        let option = request[option: Redaction.self]
        return option.covers(.default) ? option : option.union(.default)
    }

    /// `request` with `self` added to the redaction it carries (unchanged when it
    /// already hides all of it).
    func added(to request: inout APIRequest) {
        let current = request[option: Redaction.self]
        if !current.covers(self) { request[option: Redaction.self] = current.union(self) }
    }

    package func isSecretQueryItem(_ name: String) -> Bool {
        queryNames.contains(name.lowercased())
    }

    package func isSecretHeader(_ name: HTTPField.Name) -> Bool {
        headerNames.contains(name)
    }

    /// The header fields as "Name: value" lines, secret values replaced.
    func describe(_ fields: HTTPFields) -> String {
        fields.map { "\($0.name): \(isSecretHeader($0.name) ? Self.placeholder : $0.value)" }.joined(separator: ", ")
    }

    /// Redacts user information and secret query values in URL text that could not be
    /// parsed into a request.
    package func redact(urlString: String) -> String {
        var text = Substring(urlString)
        var result = ""
        if let schemeEnd = text.range(of: "://") {
            result += text[..<schemeEnd.upperBound]
            text = text[schemeEnd.upperBound...]
            let authorityEnd = text.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? text.endIndex
            if let at = text[..<authorityEnd].lastIndex(of: "@") {
                result += Self.placeholder + "@"
                text = text[text.index(after: at)...]
            }
        }
        guard let questionMark = text.firstIndex(of: "?") else { return result + text }
        result += text[...questionMark]
        return result + redact(query: text[text.index(after: questionMark)...])
    }

    /// Redacts the values of secret names in `name=value&…` text: a query, or a form
    /// body (`application/x-www-form-urlencoded`, as an OAuth password grant sends).
    package func redact(query: Substring) -> String {
        query.split(separator: "&", omittingEmptySubsequences: false).map { pair in
            guard let equals = pair.firstIndex(of: "="),
                isSecretQueryItem(PercentEncoding.decode(pair[..<equals]) ?? String(pair[..<equals]))
            else { return String(pair) }
            return pair[...equals] + Self.placeholder
        }.joined(separator: "&")
    }
}
