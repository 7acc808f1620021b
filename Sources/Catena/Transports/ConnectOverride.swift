/// Where a transport connects for a host and port, instead of where DNS says: curl's
/// `--resolve` and `--connect-to`. The request keeps its URL, its `Host` field, the TLS
/// server name and certificate check for its host, and that host's public-key pins; only
/// the TCP connection goes elsewhere. The way to try a staging server under the
/// production name, or a server on loopback under its real name.
///
/// ```swift
/// let staging = try ConnectOverride(resolve: "api.example.com:443:10.0.0.7")
/// let transport = try AsyncHTTPClientTransport(trust: .system, connectTo: [staging])
/// ```
///
/// The first override that matches a request's host and port applies. Overrides are for
/// host names: a request to an IP address connects to that address (no override names
/// one), since its certificate is checked against the address it connects to. A request
/// that goes through a proxy connects to the proxy, as curl does: the proxy resolves the
/// host.
public struct ConnectOverride: Sendable, Hashable, CustomStringConvertible {
    /// The request's host name, lowercased, without a trailing dot, in ASCII (an
    /// internationalised name in its `xn--` form); nil matches any name.
    public private(set) var host: String?
    /// The request's port (the scheme's default when its URL has none); nil matches any port.
    public private(set) var port: Int?
    /// The host name or address to connect to, without brackets; nil keeps the request's host.
    public private(set) var targetHost: String?
    /// The port to connect to; nil keeps the request's port.
    public private(set) var targetPort: Int?

    /// An override from its parts; hosts are lowercased and unbracketed.
    ///
    /// - Throws: ``ConnectOverrideError`` for a port outside 1...65535, a host that is
    ///   empty, longer than 253 bytes, or holds a character no host name or address has,
    ///   an IPv4 address with a leading zero (which some resolvers read as octal), and a
    ///   `host` that is an IP address.
    public init(host: String?, port: Int?, targetHost: String?, targetPort: Int? = nil) throws(ConnectOverrideError) {
        self.host = try host.map { host throws(ConnectOverrideError) in
            let checked = try Self.checkedHost(host, role: "host")
            guard IPAddress.bytes(of: checked) == nil else {
                throw ConnectOverrideError("the host \(checked) is an IP address: overrides are for host names (connect to another address directly)")
            }
            return Self.trimmed(checked)
        }
        self.port = try port.map { port throws(ConnectOverrideError) in try Self.checkedPort(port, role: "port") }
        self.targetHost = try targetHost.map { host throws(ConnectOverrideError) in try Self.checkedHost(host, role: "target host") }
        self.targetPort = try targetPort.map { port throws(ConnectOverrideError) in try Self.checkedPort(port, role: "target port") }
    }

    /// curl's `--resolve HOST:PORT:ADDRESS`: requests to `HOST` on `PORT` (`*`: any port)
    /// connect to `ADDRESS`, an IPv4 or IPv6 address (in brackets or not), on the same port.
    ///
    /// - Throws: ``ConnectOverrideError`` naming the part that is wrong; curl's forms
    ///   with several addresses, or with a `+` or `-` prefix, are refused.
    public init(resolve text: String) throws(ConnectOverrideError) {
        guard text.utf8.count <= 600 else { throw ConnectOverrideError("--resolve's value is longer than 600 bytes") }
        guard !text.hasPrefix("+"), !text.hasPrefix("-") else {
            throw ConnectOverrideError("--resolve \(Self.quoted(text)): the + and - forms are not supported; give HOST:PORT:ADDRESS")
        }
        var rest = Substring(text)
        let host = try Self.part(&rest, of: text, form: "HOST:PORT:ADDRESS")
        let port = try Self.part(&rest, of: text, form: "HOST:PORT:ADDRESS")
        let address = rest.hasPrefix("[") && rest.hasSuffix("]") ? rest.dropFirst().dropLast() : rest
        guard !address.contains(",") else {
            throw ConnectOverrideError("--resolve \(Self.quoted(text)): give one address (several, for a fallback, are not supported)")
        }
        guard !host.isEmpty, !port.isEmpty, IPAddress.bytes(of: String(address)) != nil else {
            throw ConnectOverrideError("--resolve \(Self.quoted(text)) is not HOST:PORT:ADDRESS with an IP address")
        }
        try self.init(host: String(host), port: port == "*" ? nil : try Self.number(port, in: text), targetHost: String(address))
    }

    /// curl's `--connect-to HOST1:PORT1:HOST2:PORT2`: requests to `HOST1` on `PORT1`
    /// connect to `HOST2` on `PORT2`. An empty `HOST1` or `PORT1` matches any; an empty
    /// `HOST2` or `PORT2` keeps the request's. An IPv6 address goes in brackets.
    ///
    /// - Throws: ``ConnectOverrideError`` naming the part that is wrong.
    public init(connectTo text: String) throws(ConnectOverrideError) {
        guard text.utf8.count <= 600 else { throw ConnectOverrideError("--connect-to's value is longer than 600 bytes") }
        var rest = Substring(text)
        let form = "HOST1:PORT1:HOST2:PORT2"
        let host = try Self.part(&rest, of: text, form: form)
        let port = try Self.part(&rest, of: text, form: form)
        let target = try Self.part(&rest, of: text, form: form)
        let targetPort = rest
        guard !targetPort.contains(":") else { throw ConnectOverrideError("--connect-to \(Self.quoted(text)) is not \(form)") }
        try self.init(
            host: host.isEmpty ? nil : String(host),
            port: port.isEmpty ? nil : try Self.number(port, in: text),
            targetHost: target.isEmpty ? nil : String(target),
            targetPort: targetPort.isEmpty ? nil : try Self.number(targetPort, in: text))
    }

    /// Whether the override applies to a request to `host` (as its URL gives it) on `port`.
    /// An IP address matches no override.
    public func matches(host requestHost: String, port requestPort: Int) -> Bool {
        if let port, port != requestPort { return false }
        let unbracketed = requestHost.hasPrefix("[") && requestHost.hasSuffix("]") ? String(requestHost.dropFirst().dropLast()) : requestHost
        guard IPAddress.bytes(of: unbracketed) == nil else { return false }
        guard let host else { return true }
        // A Unicode name matches its punycode form, as pins and the proxy bypass list do.
        return Self.trimmed(HostName.ascii(unbracketed).lowercased()) == host
    }

    /// A name without its trailing dots (`example.com.` is `example.com`).
    private static func trimmed(_ name: String) -> String {
        var name = Substring(name)
        while name.hasSuffix(".") { name = name.dropLast() }
        return String(name)
    }

    /// In curl's `--connect-to` form.
    public var description: String {
        func bracketed(_ host: String?) -> String { host.map { $0.contains(":") ? "[\($0)]" : $0 } ?? "" }
        return "\(bracketed(host)):\(port.map(String.init) ?? ""):\(bracketed(targetHost)):\(targetPort.map(String.init) ?? "")"
    }

    /// The text up to the next colon outside brackets, consumed with the colon.
    private static func part(_ rest: inout Substring, of text: String, form: String) throws(ConnectOverrideError) -> Substring {
        var end = rest.startIndex
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw ConnectOverrideError("\(quoted(text)) has a [ without its ]") }
            end = rest.index(after: close)
        }
        guard let colon = rest[end...].firstIndex(of: ":") else { throw ConnectOverrideError("\(quoted(text)) is not \(form)") }
        let part = rest[..<colon]
        rest = rest[rest.index(after: colon)...]
        guard part.hasPrefix("[") else { return part }
        let inside = part.dropFirst().dropLast()
        guard part.hasSuffix("]"), inside.contains(":") else { throw ConnectOverrideError("\(quoted(text)): brackets hold an IPv6 address only") }
        return inside
    }

    private static func number(_ text: Substring, in whole: String) throws(ConnectOverrideError) -> Int {
        guard (1...5).contains(text.utf8.count), text.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let value = Int(text) else {
            throw ConnectOverrideError("\(quoted(whole)): \(quoted(String(text))) is not a port")
        }
        return value
    }

    private static func checkedPort(_ port: Int, role: String) throws(ConnectOverrideError) -> Int {
        guard (1...65535).contains(port) else { throw ConnectOverrideError("the \(role) \(port) is outside 1...65535") }
        return port
    }

    private static func checkedHost(_ host: String, role: String) throws(ConnectOverrideError) -> String {
        let host = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        guard !host.isEmpty, host.utf8.count <= 253 else { throw ConnectOverrideError("the \(role) is empty or longer than 253 bytes") }
        // Names, IPv4 and IPv6 literals: letters, digits, '-', '.', '_', ':' (IPv6), '%' (a zone).
        guard
            host.utf8.allSatisfy({ byte in
                (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || "-._:%".utf8.contains(byte)
            })
        else {
            throw ConnectOverrideError("the \(role) \(quoted(host)) holds a character no host name or address has")
        }
        if host.contains(":"), IPAddress.bytes(of: host) == nil {
            throw ConnectOverrideError("the \(role) \(quoted(host)) is not an IPv6 address")
        }
        // All digits and dots: an IPv4 address, written as inet_pton reads it.
        if host.utf8.allSatisfy({ (0x30...0x39).contains($0) || $0 == 0x2E }) {
            let parts = host.split(separator: ".", omittingEmptySubsequences: false)
            guard IPAddress.bytes(of: host) != nil, !parts.contains(where: { $0.count > 1 && $0.hasPrefix("0") }) else {
                throw ConnectOverrideError("the \(role) \(quoted(host)) is not an IPv4 address as written (four numbers 0-255, no leading zero)")
            }
        }
        return host.lowercased()
    }

    /// `text` quoted for an error message, its control characters escaped.
    private static func quoted(_ text: String) -> String {
        "\"" + String(text.prefix(80).unicodeScalars.map { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) ? "?" : Character($0) }) + "\""
    }
}

/// Why a ``ConnectOverride`` could not be made.
public struct ConnectOverrideError: Error, Sendable, CustomStringConvertible {
    /// What was wrong.
    public let description: String

    init(_ description: String) {
        self.description = description
    }
}
