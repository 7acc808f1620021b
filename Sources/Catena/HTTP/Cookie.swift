public import Foundation

/// A cookie as a ``CookieJar`` keeps it (RFC 6265, section 5.3).
public struct Cookie: Sendable, Hashable {
    /// The name and the value, as the server sent them.
    public var name: String
    public var value: String
    /// The host it came from (host-only) or the domain it was set for, lowercased.
    public var domain: String
    /// True when it goes to ``domain`` exactly, not to its subdomains (no `Domain`
    /// attribute was given).
    public var hostOnly: Bool
    /// The path prefix it goes to.
    public var path: String
    /// Sent over HTTPS only.
    public var secure: Bool
    /// Hidden from scripts in a browser; recorded, and sent like any other cookie.
    public var httpOnly: Bool
    /// When it expires; nil for a session cookie, which lives until ``CookieJar/removeAll()``.
    public var expires: Date?
    /// When it was first stored (it keeps this when replaced), for the sending order.
    public var created: Date

    /// Whether it goes with a request to `host` over `scheme` at `path`, at `now`.
    func matches(host: String, secure isSecure: Bool, path requestPath: String, at now: Date) -> Bool {
        if let expires, expires <= now { return false }
        if secure && !isSecure { return false }
        let hostMatches = hostOnly ? host == domain : Self.domainMatches(host, domain)
        return hostMatches && Self.pathMatches(requestPath, path)
    }

    /// RFC 6265, section 5.1.3: `host` is `domain`, or a name below it (never an IP address).
    static func domainMatches(_ host: String, _ domain: String) -> Bool {
        if host == domain { return true }
        return host.hasSuffix("." + domain) && !isIPAddress(host)
    }

    /// RFC 6265, section 5.1.4.
    static func pathMatches(_ requestPath: String, _ cookiePath: String) -> Bool {
        if requestPath == cookiePath { return true }
        guard requestPath.hasPrefix(cookiePath) else { return false }
        return cookiePath.hasSuffix("/") || requestPath.dropFirst(cookiePath.count).hasPrefix("/")
    }

    /// The directory of `path` (RFC 6265, section 5.1.4): the default `Path`.
    static func defaultPath(_ path: String) -> String {
        guard path.hasPrefix("/"), let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return "/" }
        return String(path[..<slash])
    }

    /// `host` as cookies compare it: lowercased, without the trailing dot of a fully
    /// qualified name ("Example.COM." is "example.com").
    static func canonicalHost(_ host: String) -> String {
        let lowered = host.lowercased()
        return lowered.hasSuffix(".") ? String(lowered.dropLast()) : lowered
    }

    static func isIPAddress(_ host: String) -> Bool {
        host.contains(":")
            || (!host.isEmpty && host.split(separator: ".", omittingEmptySubsequences: false).count == 4
                && host.allSatisfy { $0 == "." || $0.isASCII && $0.isNumber })
    }
}

/// One `Set-Cookie` field, read as RFC 6265 section 5.2 says: lenient where browsers
/// are, and never trusting a length, a date or a domain from the wire.
struct SetCookie: Equatable {
    var name: String
    var value: String
    var domain: String?
    var path: String?
    var secure = false
    var httpOnly = false
    /// Max-Age in seconds, clamped; it wins over `expires`.
    var maxAge: Int64?
    var expires: Date?

    /// A cookie's name and value together may be this long (RFC 6265, section 6.1,
    /// asks for at least 4,096 bytes); a longer one is ignored.
    static let sizeLimit = 4096

    init?(_ field: String) {
        guard field.utf8.count <= Self.sizeLimit * 2 else { return nil }
        var parts = field.split(separator: ";", omittingEmptySubsequences: false)[...]
        guard let pair = parts.popFirst(), let equals = pair.firstIndex(of: "=") else { return nil }
        name = pair[..<equals].trimmingCharacters(in: .whitespaces)
        value = pair[pair.index(after: equals)...].trimmingCharacters(in: .whitespaces)
        guard !name.isEmpty, name.utf8.count + value.utf8.count <= Self.sizeLimit,
            !(name + value).unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
        else { return nil }
        for part in parts {
            let equals = part.firstIndex(of: "=")
            let key = (equals.map { part[..<$0] } ?? part[...]).trimmingCharacters(in: .whitespaces).lowercased()
            let argument = equals.map { part[part.index(after: $0)...].trimmingCharacters(in: .whitespaces) } ?? ""
            switch key {
            case "expires":
                expires = HTTPDate.parse(argument) ?? HTTPDate.parse(argument.replacingOccurrences(of: "-", with: " "))
            case "max-age":
                let digits = argument.hasPrefix("-") ? argument.dropFirst() : Substring(argument)
                guard !digits.isEmpty, digits.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else { continue }
                // Past 400 days, RFC 6265bis caps it anyway; a huge number must not overflow.
                let seconds = digits.count > 12 ? Int64(400 * 86_400) : min(Int64(digits)!, 400 * 86_400)
                maxAge = argument.hasPrefix("-") ? -1 : seconds
            case "domain":
                var domain = argument.lowercased()
                if domain.hasPrefix(".") { domain.removeFirst() }
                // "com." would slip past the one-label public-suffix rule: browsers
                // refuse a Domain with a trailing dot, and so does this.
                if domain.hasSuffix(".") { return nil }
                self.domain = domain.isEmpty ? nil : domain
            case "path":
                path = argument.hasPrefix("/") ? argument : nil
            case "secure": secure = true
            case "httponly": httpOnly = true
            default: continue
            }
        }
    }
}

/// The public suffixes a cookie may never be set for, beyond every single-label name
/// (`com`, `localhost`): the common multi-label ones of the Public Suffix List. Not
/// the whole list (about 9,000 rules): a `Domain` that is one of these, or any
/// one-label name, is refused; a rarer suffix is not caught.
enum PublicSuffixes {
    static let multiLabel: Set<String> = [
        "co.uk", "org.uk", "ac.uk", "gov.uk", "ltd.uk", "plc.uk", "me.uk", "net.uk", "nhs.uk",
        "com.au", "net.au", "org.au", "edu.au", "gov.au", "co.nz", "org.nz", "net.nz",
        "co.jp", "ne.jp", "or.jp", "ac.jp", "go.jp", "co.kr", "or.kr", "com.cn", "net.cn", "org.cn", "gov.cn",
        "com.br", "net.br", "org.br", "com.mx", "com.ar", "co.in", "net.in", "org.in", "co.za", "org.za",
        "com.tr", "com.tw", "com.hk", "com.sg", "co.il", "com.ua", "co.id", "com.my", "com.ph", "com.vn",
        "github.io", "gitlab.io", "herokuapp.com", "appspot.com", "blogspot.com", "cloudfront.net",
        "azurewebsites.net", "vercel.app", "netlify.app", "pages.dev", "workers.dev", "web.app",
        "firebaseapp.com", "s3.amazonaws.com", "fly.dev", "onrender.com", "glitch.me",
    ]

    static func contains(_ domain: String) -> Bool {
        !domain.contains(".") || multiLabel.contains(domain)
    }
}
