public import Foundation

/// The proxies a transport sends requests through, per URL scheme, and the hosts it
/// reaches directly (`NO_PROXY`).
///
/// Nothing goes through a proxy unless you say so: a transport without settings connects
/// straight to every server, whatever the environment holds. Read the variables curl
/// reads with ``environment(_:)``, or name a proxy:
///
/// ```swift
/// let proxy = try ProxySettings(
///     "http://alice:secret@proxy.corp.example:3128", bypass: ProxyBypass("localhost,.internal.example"))
/// let transport = try AsyncHTTPClientTransport(trust: .system, proxy: proxy)
/// ```
///
/// `AsyncHTTPClientTransport` opens a `CONNECT` tunnel through an HTTP proxy for every
/// request, `http` and `https` alike (TLS stays end to end: the proxy sees the host name
/// and port only; a proxy that allows `CONNECT` to port 443 alone, as Squid's defaults
/// do, refuses plain `http`), or goes through a SOCKS5 proxy. URLSession refuses
/// settings (see ``URLSessionTransport``).
public struct ProxySettings: Sendable, Equatable, CustomStringConvertible {
    /// The proxy for `http` URLs, or nil for none.
    public var http: Proxy?
    /// The proxy for `https` URLs, or nil for none.
    public var https: Proxy?
    /// Hosts reached directly, whatever the proxies above.
    public var bypass: ProxyBypass

    /// Settings with a proxy per scheme and the hosts that bypass them.
    public init(http: Proxy?, https: Proxy?, bypass: ProxyBypass = ProxyBypass()) {
        self.http = http
        self.https = https
        self.bypass = bypass
    }

    /// One proxy for both schemes.
    public init(_ proxy: Proxy, bypass: ProxyBypass = ProxyBypass()) {
        self.init(http: proxy, https: proxy, bypass: bypass)
    }

    /// One proxy for both schemes, from a URL as curl's `--proxy` takes it (see
    /// ``Proxy/init(_:)``).
    public init(_ url: String, bypass: ProxyBypass = ProxyBypass()) throws(ProxySettingsError) {
        self.init(try Proxy(url), bypass: bypass)
    }

    /// The settings curl reads from the environment: `http_proxy` for `http` URLs (lower
    /// case only, as curl: a CGI server puts a request's `Proxy:` header into
    /// `HTTP_PROXY`), `https_proxy` or `HTTPS_PROXY` for `https` URLs, `all_proxy` or
    /// `ALL_PROXY` for either when its own is not set, and `no_proxy` or `NO_PROXY` for
    /// the bypass list. The lower-case name wins when both are set; an empty value is
    /// unset. Nil when no proxy variable is set.
    ///
    /// - Throws: ``ProxySettingsError`` naming the variable whose value is not a proxy
    ///   URL, rather than connecting directly when a proxy was asked for.
    public static func environment(_ variables: [String: String] = ProcessInfo.processInfo.environment) throws(ProxySettingsError) -> ProxySettings? {
        func value(_ names: String...) -> (name: String, value: String)? {
            for name in names {
                if let value = variables[name]?.trimmingCharacters(in: .whitespaces), !value.isEmpty { return (name, value) }
            }
            return nil
        }
        func proxy(_ found: (name: String, value: String)?) throws(ProxySettingsError) -> Proxy? {
            guard let found else { return nil }
            do {
                return try Proxy(found.value)
            } catch {
                throw ProxySettingsError("\(found.name): \(error.description)")
            }
        }
        // ALL_PROXY is read only for a scheme without its own, as curl does.
        let ownHTTP = try proxy(value("http_proxy")), ownHTTPS = try proxy(value("https_proxy", "HTTPS_PROXY"))
        let all = ownHTTP == nil || ownHTTPS == nil ? try proxy(value("all_proxy", "ALL_PROXY")) : nil
        let http = ownHTTP ?? all
        let https = ownHTTPS ?? all
        guard http != nil || https != nil else { return nil }
        return ProxySettings(http: http, https: https, bypass: ProxyBypass(value("no_proxy", "NO_PROXY")?.value ?? ""))
    }

    /// The proxy a request to `scheme://host:port` goes through, or nil to connect
    /// directly.
    public func proxy(scheme: String, host: String, port: Int?) -> Proxy? {
        let proxy = scheme.lowercased() == "https" ? https : http
        guard let proxy, !bypass.matches(host: host, port: port ?? (scheme.lowercased() == "https" ? 443 : 80)) else { return nil }
        return proxy
    }

    /// The proxies and the bypass list, passwords hidden.
    public var description: String {
        "ProxySettings(http: \(http.map(\.description) ?? "none"), https: \(https.map(\.description) ?? "none"), bypass: \(bypass))"
    }

    /// A proxy server: HTTP (`CONNECT` for `https` URLs) or SOCKS5.
    public struct Proxy: Sendable, Hashable, CustomStringConvertible, CustomReflectable {
        /// How a transport speaks to the proxy.
        public enum Kind: String, Sendable, Hashable {
            /// An HTTP proxy, through a `CONNECT` tunnel.
            case http
            /// A SOCKS5 proxy; host names are resolved by the proxy (curl's `socks5h`).
            case socks5
        }

        /// How to speak to it.
        public var kind: Kind
        /// Its host name or IP address.
        public var host: String
        /// Its port.
        public var port: Int
        /// The user name and password for `Proxy-Authorization: Basic`, or nil. Sent to
        /// the proxy only, never to a server.
        public var credentials: BasicCredentials?

        /// A proxy from its parts.
        public init(kind: Kind = .http, host: String, port: Int, credentials: BasicCredentials? = nil) {
            self.kind = kind
            self.host = host
            self.port = port
            self.credentials = credentials
        }

        /// A proxy from a URL as curl takes it: `[scheme://][user:password@]host[:port]`,
        /// where the scheme is `http` (the default, port 1080 unless given) or `socks5`
        /// / `socks5h` (port 1080), and the user and password are percent-encoded.
        ///
        /// - Throws: ``ProxySettingsError`` for another scheme (an `https` proxy, spoken
        ///   to over TLS, is not supported by AsyncHTTPClient), a missing host, a bad
        ///   port, or a path; the error never shows the password.
        public init(_ url: String) throws(ProxySettingsError) {
            let text = url.trimmingCharacters(in: .whitespaces)
            let withScheme = text.contains("://") ? text : "http://" + text
            guard let components = URLComponents(string: withScheme), let scheme = components.scheme?.lowercased() else {
                throw ProxySettingsError("\(Self.hidingPassword(text)) is not a proxy URL")
            }
            switch scheme {
            case "http": kind = .http
            case "socks5", "socks5h": kind = .socks5
            default:
                throw ProxySettingsError("proxy scheme \"\(scheme)\" is not supported: use http:// (CONNECT for https) or socks5://")
            }
            guard let host = components.host, !host.isEmpty else { throw ProxySettingsError("\(Self.hidingPassword(text)) names no proxy host") }
            guard components.path.isEmpty || components.path == "/", components.query == nil, components.fragment == nil else {
                throw ProxySettingsError("\(Self.hidingPassword(text)) has a path or query: a proxy is a host and a port")
            }
            // URLComponents traps on no port value it reads; bounds are checked here.
            guard let port = components.port ?? Optional(1080), (1...65_535).contains(port) else {
                throw ProxySettingsError("\(Self.hidingPassword(text)) has a port outside 1...65535")
            }
            self.host = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
            self.port = port
            if let user = components.user {
                guard kind == .http else {
                    throw ProxySettingsError("a SOCKS5 proxy with a user and password is not supported by AsyncHTTPClient")
                }
                credentials = BasicCredentials(user: user, password: components.password ?? "")
            } else {
                credentials = nil
            }
        }

        /// `scheme://host:port`, with the user name but never the password.
        public var description: String {
            let user = credentials.map { "\($0.user):•••@" } ?? ""
            let host = self.host.contains(":") ? "[\(self.host)]" : self.host
            return "\(kind == .http ? "http" : "socks5")://\(user)\(host):\(port)"
        }

        /// No children: `dump` shows the description, not the password.
        public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }

        public static func == (left: Proxy, right: Proxy) -> Bool {
            left.kind == right.kind && left.host == right.host && left.port == right.port
                && left.credentials?.user == right.credentials?.user && left.credentials?.password == right.credentials?.password
        }

        public func hash(into hasher: inout Hasher) {
            hasher.combine(kind)
            hasher.combine(host)
            hasher.combine(port)
            hasher.combine(credentials?.user)
        }

        /// `text` with anything between `:` and `@` after the scheme replaced.
        static func hidingPassword(_ text: String) -> String {
            guard let at = text.lastIndex(of: "@") else { return text }
            let userInfo = text[..<at]
            let start = userInfo.range(of: "://")?.upperBound ?? userInfo.startIndex
            guard let colon = userInfo[start...].firstIndex(of: ":") else { return text }
            return String(text[..<colon]) + ":•••" + String(text[at...])
        }
    }
}

/// A proxy setting that cannot be used. Its description never holds a password.
public struct ProxySettingsError: Error, Sendable, CustomStringConvertible {
    /// What was wrong.
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}

/// The hosts a request reaches without a proxy: a `NO_PROXY` list, read with curl's
/// rules, and a port per entry besides (as Go's and Python's readers take it).
///
/// Entries are separated by commas or white space, letter case ignored:
/// - `*` as the whole list: every host;
/// - a name: that host and every host under it (`example.com` matches `example.com` and
///   `api.example.com`, not `notexample.com`); a leading dot changes nothing;
/// - an IP address (IPv6 with or without brackets): that address; with `/bits` (CIDR),
///   every address in the block; a name never matches an address entry;
/// - any of these with `:port`: on that port only (a port-less entry matches every port).
public struct ProxyBypass: Sendable, Equatable, CustomStringConvertible {
    /// The entries as given, trimmed.
    public let entries: [String]
    private let matchesAll: Bool
    private let rules: [Rule]

    private enum Rule: Equatable {
        case domain(String, port: Int?)
        case address([UInt8], bits: Int, port: Int?)
    }

    /// A list as `NO_PROXY` holds it: `"localhost,127.0.0.1,.corp.example,10.0.0.0/8"`.
    /// Entries that are neither a name nor an address are ignored, as curl does.
    public init(_ list: String = "") {
        let entries = list.split(whereSeparator: { $0 == "," || $0.isWhitespace }).map(String.init)
        self.entries = entries
        matchesAll = entries == ["*"]
        rules = entries.compactMap(Self.rule)
    }

    /// Whether a request to `host` on `port` goes direct.
    public func matches(host: String, port: Int) -> Bool {
        if matchesAll { return true }
        guard !rules.isEmpty else { return false }
        var name = HostName.ascii(host)
        if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        if name.hasSuffix(".") { name.removeLast() }
        let address = IPAddress.bytes(of: name)
        for rule in rules {
            switch rule {
            case .domain(let domain, let only):
                guard only == nil || only == port, address == nil else { continue }
                if name == domain || (name.hasSuffix(domain) && name.dropLast(domain.count).hasSuffix(".")) { return true }
            case .address(let block, let bits, let only):
                guard only == nil || only == port, let address, address.count == block.count else { continue }
                if IPAddress.prefix(of: address, equals: block, bits: bits) { return true }
            }
        }
        return false
    }

    public var description: String { entries.isEmpty ? "none" : entries.joined(separator: ",") }

    private static func rule(_ entry: String) -> Rule? {
        var text = Substring(entry.lowercased())
        var port: Int?
        // `[v6]:port`, `host:port`; a bare IPv6 address has several colons and no port.
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            let after = text[text.index(after: close)...]
            if after.hasPrefix(":") {
                guard let value = Int(after.dropFirst()), (1...65_535).contains(value) else { return nil }
                port = value
            } else if !after.isEmpty {
                return nil
            }
            text = text[text.index(after: text.startIndex)..<close]
        } else if text.filter({ $0 == ":" }).count == 1, let colon = text.firstIndex(of: ":") {
            guard let value = Int(text[text.index(after: colon)...]), (1...65_535).contains(value) else { return nil }
            port = value
            text = text[..<colon]
        }
        var bits: Int?
        if let slash = text.firstIndex(of: "/") {
            guard let value = Int(text[text.index(after: slash)...]) else { return nil }
            bits = value
            text = text[..<slash]
        }
        if let address = IPAddress.bytes(of: String(text)) {
            let width = address.count * 8
            guard (0...width).contains(bits ?? width) else { return nil }
            return .address(address, bits: bits ?? width, port: port)
        }
        while text.hasPrefix(".") { text = text.dropFirst() }
        while text.hasSuffix(".") { text = text.dropLast() }
        guard bits == nil, !text.isEmpty else { return nil }
        return .domain(HostName.ascii(String(text)), port: port)
    }
}

/// IPv4 and IPv6 literals as bytes: the bypass list's address rules, pin keys, and the
/// demo server's certificates.
package enum IPAddress {
    /// The 4 or 16 bytes of a literal address, or nil for anything else.
    package static func bytes(of text: String) -> [UInt8]? {
        if text.contains(":") { return v6(text) }
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var bytes: [UInt8] = []
        for part in parts {
            guard (1...3).contains(part.count), part.allSatisfy(\.isASCIIDigit), let value = UInt8(part) else { return nil }
            bytes.append(value)
        }
        return bytes
    }

    private static func v6(_ text: String) -> [UInt8]? {
        guard text.utf8.count <= 45 else { return nil }
        var text = Substring(text)
        // A dotted IPv4 address as the last 32 bits (`::ffff:10.0.0.1`).
        var embedded: [UInt16] = []
        if let colon = text.lastIndex(of: ":"), text[colon...].contains(".") {
            guard let v4 = bytes(of: String(text[text.index(after: colon)...])), v4.count == 4 else { return nil }
            embedded = [UInt16(v4[0]) << 8 | UInt16(v4[1]), UInt16(v4[2]) << 8 | UInt16(v4[3])]
            // Keep the colon when it is half of a "::" so the halves below still see it.
            text = colon > text.startIndex && text[text.index(before: colon)] == ":" ? text[...colon] : text[..<colon]
        }
        let halves = text.components(separatedBy: "::")
        guard halves.count <= 2 else { return nil }
        func groups(_ part: String) -> [UInt16]? {
            guard !part.isEmpty else { return [] }
            var values: [UInt16] = []
            for group in part.split(separator: ":", omittingEmptySubsequences: false) {
                guard (1...4).contains(group.count), let value = UInt16(group, radix: 16) else { return nil }
                values.append(value)
            }
            return values
        }
        guard let head = groups(halves[0]) else { return nil }
        let tail = halves.count == 2 ? groups(halves[1]).map { $0 + embedded } : nil
        let all: [UInt16]
        if halves.count == 2 {
            guard let tail else { return nil }
            let missing = 8 - head.count - tail.count
            guard missing >= 1 else { return nil }
            all = head + Array(repeating: 0, count: missing) + tail
        } else {
            all = head + embedded
            guard all.count == 8 else { return nil }
        }
        return all.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
    }

    /// Whether the first `bits` bits of `address` and `block` agree.
    static func prefix(of address: [UInt8], equals block: [UInt8], bits: Int) -> Bool {
        var left = bits
        for (a, b) in zip(address, block) {
            guard left > 0 else { return true }
            let mask: UInt8 = left >= 8 ? 0xFF : ~(0xFF >> UInt8(left))
            guard a & mask == b & mask else { return false }
            left -= 8
        }
        return true
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}
