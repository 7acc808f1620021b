#if AsyncHTTPClient
import AsyncHTTPClient
import Catena
import Foundation
import NIOCore
import NIOSSL
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The clients of a transport with proxy settings or public-key pins. AsyncHTTPClient
/// takes a proxy and a connection check per client, not per request, so each way of
/// connecting (which proxy; which host's pins) gets a client of its own, made when first
/// needed and shut down with the transport. Requests that need neither take the main
/// client, without a lookup.
final class ClientRoutes: Sendable {
    /// A way of connecting: through which proxy (nil: directly), checking whose pins,
    /// and for HTTPS to an IP address through a proxy, which address the certificate
    /// must name.
    struct Route: Hashable {
        let proxy: ProxySettings.Proxy?
        let pinnedHost: String?
        var checkedAddress: [UInt8]? = nil
        /// For a `ConnectOverride`: the request's host (as AsyncHTTPClient reads it from
        /// the URL) and the host or address to connect to instead.
        var connect: ConnectTarget? = nil
    }

    struct ConnectTarget: Hashable {
        let host: String
        let target: String
    }

    private struct State {
        var clients: [Route: HTTPClient] = [:]
        var isShutDown = false
    }

    /// The configuration every route's client starts from.
    private let base: HTTPClient.Configuration
    let proxies: ProxySettings?
    /// Per lowercased host, the SHA-256 digests one of which its leaf's key must have.
    let pins: [String: Set<[UInt8]>]
    /// Where to connect instead of where DNS says, the first match winning.
    let overrides: [ConnectOverride]
    private let state = Locked(State())

    init(base: HTTPClient.Configuration, proxies: ProxySettings?, pins: [String: Set<[UInt8]>], overrides: [ConnectOverride] = []) {
        self.base = base
        self.proxies = proxies
        self.pins = pins
        self.overrides = overrides
    }

    /// The route of a request, or nil for the main client (direct, no pins).
    func route(of request: APIRequest) -> Route? {
        guard let host = request.host, let scheme = request.scheme else { return nil }
        // Over a Unix socket no proxy; the host's pins still hold for TLS there.
        let proxy = request[option: UnixSocket.self] != nil ? nil : proxies?.proxy(scheme: scheme, host: host, port: request.port)
        // Hosts usually come as they were pinned: the normalising pass only when not.
        let key = pins.isEmpty || pins[host] != nil ? host : Self.pinKey(host)
        let pinnedHost = scheme == "https" && pins[key] != nil ? key : nil
        // Through a proxy the proxy resolves the host, as with curl.
        var connect: ConnectTarget?
        if proxy == nil, !overrides.isEmpty, request[option: UnixSocket.self] == nil {
            let port = request.port ?? (scheme == "https" ? 443 : 80)
            if let target = overrides.first(where: { $0.matches(host: host, port: port) })?.targetHost {
                // A name (no override matches an address), as AsyncHTTPClient keys dnsOverride.
                connect = ConnectTarget(host: host, target: target)
            }
        }
        guard proxy != nil || pinnedHost != nil || connect != nil else { return nil }
        // AsyncHTTPClient gives NIOSSL no server name for an IP address, and NIOSSL then
        // checks the certificate against the channel's remote address: through a tunnel,
        // the proxy's. The route checks the target's address itself.
        var address = proxy != nil && scheme == "https" ? IPAddress.bytes(of: Self.unbracketed(host)) : nil
        // An IPv4-mapped IPv6 address reaches the IPv4 host, which a certificate names in 4 bytes.
        if let mapped = address, mapped.count == 16, mapped.prefix(12).elementsEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF]) {
            address = Array(mapped.suffix(4))
        }
        return Route(proxy: proxy, pinnedHost: pinnedHost, checkedAddress: address, connect: connect)
    }

    /// The route's client, made on first use; nil once the transport was shut down (the
    /// main client, also shut down, then fails the request).
    func client(for route: Route) -> HTTPClient? {
        state.withLock { state in
            guard !state.isShutDown else { return nil }
            if let client = state.clients[route] { return client }
            let client = HTTPClient(eventLoopGroup: .singletonMultiThreadedEventLoopGroup, configuration: configuration(for: route))
            state.clients[route] = client
            return client
        }
    }

    /// The clients made so far; none are made after this.
    func shutDown() -> [HTTPClient] {
        state.withLock { state in
            state.isShutDown = true
            return Array(state.clients.values)
        }
    }

    func configuration(for route: Route) -> HTTPClient.Configuration {
        var configuration = base
        if let proxy = route.proxy {
            switch proxy.kind {
            case .http:
                let authorization = proxy.credentials.map { HTTPClient.Authorization.basic(username: $0.user, password: $0.password) }
                configuration.proxy = .server(host: proxy.host, port: proxy.port, authorization: authorization)
            case .socks5:
                configuration.proxy = .socksServer(host: proxy.host, port: proxy.port)
            }
        }
        if let connect = route.connect {
            // AsyncHTTPClient connects there on the URL's port, and keeps the URL's host
            // for the server name and the certificate check.
            configuration.dnsOverride[connect.host] = connect.target
        }
        var checks: [@Sendable (any Channel) -> EventLoopFuture<Void>] = []
        if let address = route.checkedAddress {
            // The chain is still verified in full; the name check is the address check below.
            var tls = configuration.tlsConfiguration ?? .makeClientConfiguration()
            tls.certificateVerification = .noHostnameVerification
            configuration.tlsConfiguration = tls
            checks.append(Self.addressCheck(address))
        }
        if let host = route.pinnedHost, let pins = pins[host] { checks.append(Self.pinCheck(host: host, pins: pins)) }
        if let first = checks.first {
            let rest = checks.dropFirst()
            let check: @Sendable (any Channel) -> EventLoopFuture<Void> = { channel in
                rest.reduce(first(channel)) { done, next in done.flatMap { next(channel) } }
            }
            // After the caller's own initializers, if any.
            configuration.http1_1ConnectionDebugInitializer = Self.chain(base.http1_1ConnectionDebugInitializer, check)
            configuration.http2ConnectionDebugInitializer = Self.chain(base.http2ConnectionDebugInitializer, check)
            // With retries, AsyncHTTPClient backs off a connection that failed the check, and
            // the check's close of its channel then trips the pool's state machine (a
            // precondition when the backoff ends): a mismatch fails the calls at once instead.
            configuration.connectionPool.retryConnectionEstablishment = false
        }
        return configuration
    }

    private static func chain(
        _ first: (@Sendable (any Channel) -> EventLoopFuture<Void>)?, _ then: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) -> @Sendable (any Channel) -> EventLoopFuture<Void> {
        guard let first else { return then }
        return { channel in first(channel).flatMap { then(channel) } }
    }

    /// The form a host is pinned under and looked up by: lower case and IDNA, without brackets or
    /// trailing dots, an IP address in one spelling (`::1`, `0:0::1` and `[::1]` alike),
    /// so that no other spelling of a pinned host reaches it unchecked.
    static func pinKey(_ host: String) -> String {
        // The IDNA form: the name the transport connects to, whichever spelling was pinned.
        var key = HostName.ascii(host)
        if key.hasPrefix("["), key.hasSuffix("]") { key = String(key.dropFirst().dropLast()) }
        while key.hasSuffix(".") { key.removeLast() }
        if var address = IPAddress.bytes(of: key) {
            // An IPv4-mapped IPv6 address reaches the IPv4 host.
            if address.count == 16, address.prefix(12).elementsEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF]) { address = Array(address.suffix(4)) }
            return address.map { String($0) }.joined(separator: ".")
        }
        // The other spellings the resolver reads as an IPv4 address ("10.1", "167772161",
        // "0x0a.0.0.1"), as inet_aton reads them.
        if !key.isEmpty, key.allSatisfy({ $0.isHexDigit || $0 == "." || $0 == "x" }), key.first?.isNumber == true {
            var address = in_addr()
            if inet_aton(key, &address) == 1 {
                return withUnsafeBytes(of: address.s_addr) { $0.map { String($0) }.joined(separator: ".") }
            }
        }
        return key
    }

    private static func unbracketed(_ host: String) -> String {
        host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
    }

    /// Checks that a new connection's certificate names `address` (an IP address
    /// subject alternative name), before any request is written; as curl checks an IP
    /// target, whatever the tunnel's remote address.
    static func addressCheck(_ address: [UInt8]) -> @Sendable (any Channel) -> EventLoopFuture<Void> {
        { channel in
            channel.eventLoop.submit { () throws -> Void in
                let handler = try channel.pipeline.syncOperations.handler(type: NIOSSLHandler.self)
                guard let leaf = handler.peerCertificate else { throw CertificateAddressMismatch(address: address) }
                // NIOSSL's reader of the names (underscored, public since 2.x): IP entries are 4 or 16 raw bytes.
                let named = leaf._subjectAlternativeNames().contains { $0.nameType == .ipAddress && Array($0.contents) == address }
                guard named else { throw CertificateAddressMismatch(address: address) }
            }.flatMapErrorThrowing { error in
                channel.eventLoop.execute { channel.close(promise: nil) }
                throw error
            }
        }
    }

    /// Checks a new connection's server key against `pins` once its TLS handshake is done.
    ///
    /// AsyncHTTPClient runs this before it hands the connection to any request (its
    /// connection factory waits for the returned future), so no byte of a request is
    /// written to a server whose key does not match; the connection is then closed, and
    /// the waiting requests fail with the error. NIOSSL exposes the leaf alone, so only
    /// the leaf's key can be pinned (checked at setup).
    static func pinCheck(host: String, pins: Set<[UInt8]>) -> @Sendable (any Channel) -> EventLoopFuture<Void> {
        { channel in
            channel.eventLoop.submit { () throws -> Void in
                let handler = try channel.pipeline.syncOperations.handler(type: NIOSSLHandler.self)
                guard let leaf = handler.peerCertificate else { throw PublicKeyPinMismatch(host: host, presented: nil) }
                let digest = SHA256.hash(try leaf.extractPublicKey().toSPKIBytes())
                guard pins.contains(digest) else { throw PublicKeyPinMismatch(host: host, presented: Data(digest).base64EncodedString()) }
            }.flatMapErrorThrowing { error in
                // Closed after AsyncHTTPClient has dropped the connection, which the
                // failed future makes it do first.
                channel.eventLoop.execute { channel.close(promise: nil) }
                throw error
            }
        }
    }

    /// Refuses proxies AsyncHTTPClient cannot use as given, rather than connect otherwise.
    static func check(_ settings: ProxySettings) throws(ServerTrustError) {
        for proxy in [settings.http, settings.https].compactMap(\.self) {
            guard !proxy.host.isEmpty, (1...65_535).contains(proxy.port) else {
                throw ServerTrustError("the proxy \(proxy) needs a host and a port in 1...65535")
            }
            guard proxy.kind == .http || proxy.credentials == nil else {
                throw ServerTrustError("the SOCKS5 proxy \(proxy) has a user and password, which AsyncHTTPClient's SOCKS client cannot send")
            }
        }
    }

    /// The pins of `trust` as digests, checked: each must be base64 of 32 bytes, and none
    /// may be the key of one of `trust`'s roots, which the check never sees.
    static func digests(of trust: ServerTrust) throws(ServerTrustError) -> [String: Set<[UInt8]>] {
        var rootKeys: Set<[UInt8]> = []
        for der in trust.additionalRoots {
            if let key = try? NIOSSLCertificate(bytes: Array(der), format: .der).extractPublicKey().toSPKIBytes() {
                rootKeys.insert(SHA256.hash(key))
            }
        }
        var digests: [String: Set<[UInt8]>] = [:]
        for (host, values) in trust.publicKeyPins {
            let host = pinKey(host)
            // A host name or an address in its one form: a port, a wildcard or a scheme
            // would make a key no request ever finds, a pin that silently does nothing.
            guard !host.isEmpty, host.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == "_") }) else {
                throw ServerTrustError("pin host \"\(host.prefix(80))\" is not a host name or an IP address (no scheme, port, path or wildcard)")
            }
            guard !values.isEmpty else { throw ServerTrustError("the pins for \(host) are empty: name the leaf's key and a backup") }
            for value in values {
                let text = value.hasPrefix("sha256//") ? String(value.dropFirst("sha256//".count)) : value
                guard let bytes = Data(base64Encoded: text), bytes.count == 32 else {
                    throw ServerTrustError("pin \"\(value.prefix(80))\" for \(host) is not the base64 of a SHA-256 digest (44 characters)")
                }
                guard !rootKeys.contains(Array(bytes)) else {
                    throw ServerTrustError(
                        "pin \"\(value)\" for \(host) is the key of one of your roots: AsyncHTTPClient shows only the server's "
                            + "leaf certificate, so pin the leaf's key (and a backup), or make that root the only trust anchor "
                            + "(excludesSystemRoots) instead of pinning it")
                }
                digests[host, default: []].insert(Array(bytes))
            }
        }
        return digests
    }
}

/// A server reached by IP address whose certificate does not name that address.
struct CertificateAddressMismatch: Error, CustomStringConvertible {
    let address: [UInt8]

    var description: String {
        let text =
            address.count == 4
            ? address.map(String.init).joined(separator: ".")
            : stride(from: 0, to: address.count, by: 2).map { String(UInt16(address[$0]) << 8 | UInt16(address[$0 + 1]), radix: 16) }.joined(separator: ":")
        return "the server's certificate does not name \(text), the address it was reached at (through a proxy, checked by Catena)"
    }
}

/// A server whose leaf certificate's key is none of its host's pins.
struct PublicKeyPinMismatch: Error, CustomStringConvertible {
    let host: String
    /// The base64 SHA-256 of the key it presented; nil when it presented none.
    let presented: String?

    var description: String {
        guard let presented else { return "\(host) presented no certificate to check against its public-key pins" }
        return "the public key of \(host)'s certificate (sha256//\(presented)) is none of its pins"
    }
}
#endif  // AsyncHTTPClient
