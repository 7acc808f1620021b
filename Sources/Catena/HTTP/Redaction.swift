public import HTTPTypes

/// Which header fields and query items are secret. Logs and error descriptions print
/// `<redacted>` in place of their values.
public struct Redaction: Sendable {
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
        Redaction(headerNames: Redaction.default.headerNames.union(headers),
                  queryNames: Redaction.default.queryNames.union(queryItems))
    }

    func isSecretQueryItem(_ name: String) -> Bool {
        queryNames.contains(name.lowercased())
    }

    func isSecretHeader(_ name: HTTPField.Name) -> Bool {
        headerNames.contains(name)
    }

    /// The header fields as "Name: value" lines, secret values replaced.
    func describe(_ fields: HTTPFields) -> String {
        fields.map { "\($0.name): \(isSecretHeader($0.name) ? Self.placeholder : $0.value)" }.joined(separator: ", ")
    }

    /// Redacts user information and secret query values in URL text that could not be
    /// parsed into a request.
    func redact(urlString: String) -> String {
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
        let query = text[text.index(after: questionMark)...]
        result += query.split(separator: "&", omittingEmptySubsequences: false).map { pair in
            guard let equals = pair.firstIndex(of: "="),
                  isSecretQueryItem(PercentEncoding.decode(pair[..<equals]) ?? String(pair[..<equals]))
            else { return String(pair) }
            return pair[...equals] + Self.placeholder
        }.joined(separator: "&")
        return result
    }
}
