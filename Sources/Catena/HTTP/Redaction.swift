import Foundation
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

    /// Header fields whose values are never printed, besides those ``SecretNames`` names.
    public var headerNames: Set<HTTPField.Name>
    /// Names of query items, form fields, JSON members and multipart parts (compared
    /// case-insensitively) whose values are never printed, besides those ``SecretNames``
    /// names.
    public var queryNames: Set<String>
    /// Words that make any name containing them secret (compared as ``SecretNames``
    /// compares its own), besides ``SecretNames/words``.
    public var words: Set<String>

    /// The rule of ``SecretNames`` and nothing more. Every redaction hides at least this.
    public static let `default` = Redaction(headerNames: [], queryNames: [])

    /// A redaction that hides these names, and these words anywhere in a name, on top of
    /// ``SecretNames``' rule (which no redaction can turn off).
    public init(headerNames: Set<HTTPField.Name>, queryNames: Set<String>, words: Set<String> = []) {
        self.headerNames = headerNames
        self.queryNames = Set(queryNames.map { $0.lowercased() })
        self.words = Set(words.map { SecretNames.normalized($0) }.filter { !$0.isEmpty })
    }

    /// The default redaction plus these names and words.
    public static func adding(headers: [HTTPField.Name] = [], queryItems: [String] = [], words: [String] = []) -> Redaction {
        Redaction(headerNames: Set(headers), queryNames: Set(queryItems), words: Set(words))
    }

    /// The option's value until a loader or the caller sets one: ``default``.
    public static var defaultValue: Redaction { .default }

    /// Everything either redaction hides.
    public func union(_ other: Redaction) -> Redaction {
        Redaction(headerNames: headerNames.union(other.headerNames), queryNames: queryNames.union(other.queryNames), words: words.union(other.words))
    }

    /// Whether this hides everything `other` hides.
    func covers(_ other: Redaction) -> Bool {
        headerNames.isSuperset(of: other.headerNames) && queryNames.isSuperset(of: other.queryNames) && words.isSuperset(of: other.words)
    }

    /// What `request`'s description and logs hide: its ``Redaction`` option (which,
    /// like every redaction, never hides less than ``default``).
    package static func effective(for request: APIRequest) -> Redaction {
        request[option: Redaction.self]
    }

    /// `request` with `self` added to the redaction it carries (unchanged when it
    /// already hides all of it).
    func added(to request: inout APIRequest) {
        let current = request[option: Redaction.self]
        if !current.covers(self) { request[option: Redaction.self] = current.union(self) }
    }

    /// Whether the value of a query item, form field, JSON member or multipart part
    /// named `name` is secret.
    public func isSecret(name: some StringProtocol) -> Bool {
        (!queryNames.isEmpty && queryNames.contains(name.lowercased())) || SecretNames.isSecret(name, extraWords: words)
    }

    /// Whether the value of the header field `name` is secret.
    public func isSecretHeader(_ name: HTTPField.Name) -> Bool {
        headerNames.contains(name) || isSecret(name: name.canonicalName)
    }

    package func isSecretQueryItem(_ name: String) -> Bool {
        isSecret(name: name)
    }

    /// A header field's value as it may be printed or recorded: the placeholder for a
    /// secret field; the URLs in `Location`, `Content-Location`, `Referer`, `Link` and `Refresh`
    /// with their secret query values and user information redacted; any other as it is.
    public func printableValue(of field: HTTPField) -> String {
        if isSecretHeader(field.name) { return Self.placeholder }
        switch field.name {
        case .location, .contentLocation, .referer: return redact(urlString: field.value)
        default:
            switch field.name.canonicalName {
            case "link": return redactLinks(field.value)
            // `5; url=https://…`, sent by servers though never standardised.
            case "refresh": return redactRefresh(field.value)
            default: return field.value
            }
        }
    }

    /// The header fields as "Name: value" lines, secret values replaced.
    func describe(_ fields: HTTPFields) -> String {
        fields.map { "\($0.name): \(printableValue(of: $0))" }.joined(separator: ", ")
    }

    /// Each `<URL>` of a `Link` value redacted (RFC 8288).
    private func redactLinks(_ value: String) -> String {
        var result = ""
        var rest = Substring(value)
        while let open = rest.firstIndex(of: "<"), let close = rest[open...].firstIndex(of: ">") {
            result += rest[...open]
            result += redact(urlString: String(rest[rest.index(after: open)..<close]))
            result += ">"
            rest = rest[rest.index(after: close)...]
        }
        return result + rest
    }

    /// The URL after `url=` in a `Refresh` value (`5; url=https://…`) redacted.
    private func redactRefresh(_ value: String) -> String {
        guard let marker = value.range(of: "url=", options: .caseInsensitive) else { return value }
        return value[..<marker.upperBound] + redact(urlString: String(value[marker.upperBound...]))
    }

    /// Redacts user information, secret query values and secret values in a fragment
    /// written as a query (`#access_token=…`, as OAuth's implicit flow answers) in URL
    /// text that could not be parsed into a request.
    package func redact(urlString: String) -> String {
        guard let hash = urlString.firstIndex(of: "#") else { return redactBeforeFragment(urlString) }
        let fragment = urlString[urlString.index(after: hash)...]
        return redactBeforeFragment(String(urlString[..<hash])) + "#" + (fragment.contains("=") ? redact(query: fragment) : String(fragment))
    }

    private func redactBeforeFragment(_ urlString: String) -> String {
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
