#if AsyncHTTPClient
public import AsyncHTTPClient
public import Catena
import Foundation
import NIOSSL

extension AsyncHTTPClientTransport {
    /// A transport that owns a new client which trusts HTTPS servers as `trust` says,
    /// presents `identity` when a server asks for one, and goes through `proxy`'s
    /// proxies. Call ``shutdown()`` when done.
    ///
    /// Pinning by trust anchor: your root alone, with `excludesSystemRoots`, and only
    /// chains that reach it are accepted (an intermediate the server sends is fine).
    ///
    /// Pinning by public key: `trust.publicKeyPins` names, per host, the SHA-256 of the
    /// keys (base64, optionally `sha256//`-prefixed as curl writes them) one of which
    /// the server's leaf certificate must carry, besides passing the usual validation.
    /// The key is checked once per new connection, after the handshake and before any
    /// byte of a request is written; a mismatch fails the request with
    /// `CatenaError/Code/untrustedServer`. Name a backup key too, so a key rotation does
    /// not lock clients out. AsyncHTTPClient shows only the leaf, so a pin of one of
    /// your roots' keys is refused: make that root the only anchor instead.
    ///
    /// Trust is never weaker than `trust` says: a `configuration` whose
    /// `certificateVerification` is less than full is refused, and with
    /// `excludesSystemRoots` the configuration's own roots (`trustRoots`,
    /// `additionalTrustRoots`) are dropped, so `trust`'s roots are the only ones.
    ///
    /// With `identity`, the client presents that certificate when a server asks for one
    /// (mutual TLS), over HTTP/1.1 and HTTP/2; a certificate or key that does not read,
    /// or a key that does not match the certificate, is refused here.
    ///
    /// With `proxy`, requests go through its proxy for their scheme unless its bypass
    /// list names their host (see `ProxySettings`); the proxy's credentials go to the
    /// proxy alone. Without it (or with a `configuration.proxy` of your own), the
    /// environment's proxy variables are not read: pass `try ProxySettings.environment()`
    /// to follow them as curl does.
    ///
    /// With `connectTo`, a request whose host and port an override matches connects
    /// where it says (see `ConnectOverride`), keeping its URL, `Host` field, TLS name
    /// check and pins; its WebSockets too. Requests to an IP address are left alone (see
    /// `ConnectOverride`). AsyncHTTPClient connects on the URL's port,
    /// so an override must keep the port (curl's `--resolve`, or `--connect-to` with an
    /// empty or equal second port); a request through a proxy connects to the proxy.
    ///
    /// - Throws: `ServerTrustError` for a configuration that verifies less than fully;
    ///   for a root that is not a certificate; for one that is not a root (an
    ///   intermediate or a leaf): NIOSSL has no partial-chain setting, so such an anchor
    ///   would fail every handshake, and a transport that could connect to nothing is
    ///   refused at setup; for a pin that is not a SHA-256 digest, or is a root's key;
    ///   for an identity that cannot be used; and for a proxy without a host, with a
    ///   port outside 1...65535, or SOCKS5 with a password (AsyncHTTPClient's SOCKS
    ///   client has no authentication); and for an override that changes the port, or
    ///   with the configuration's own proxy.
    public convenience init(
        configuration: HTTPClient.Configuration = defaultConfiguration, trust: ServerTrust,
        identity: ClientIdentity? = nil, proxy: ProxySettings? = nil, connectTo: [ConnectOverride] = [], timeout: Duration = .seconds(60)
    ) throws(ServerTrustError) {
        if !connectTo.isEmpty, configuration.proxy != nil {
            throw ServerTrustError(
                "connectTo with the configuration's own proxy, which would be asked for the override's target: give the proxy as ProxySettings")
        }
        for override in connectTo where override.targetPort != nil && override.targetPort != override.port {
            throw ServerTrustError(
                "the override \(override) changes the port, and AsyncHTTPClient connects on the URL's port: "
                    + "give the same port, or none (curl's --resolve form)")
        }
        var configuration = configuration
        var tls = configuration.tlsConfiguration ?? .makeClientConfiguration()
        guard tls.certificateVerification == .fullVerification else {
            throw ServerTrustError(
                "the configuration's certificateVerification is \(tls.certificateVerification), weaker than the full verification "
                    + "a ServerTrust asks for: leave it at .fullVerification")
        }
        var roots: [NIOSSLCertificate] = []
        for (index, der) in trust.additionalRoots.enumerated() {
            do {
                roots.append(try NIOSSLCertificate(bytes: Array(der), format: .der))
            } catch {
                throw ServerTrustError("root certificate \(index + 1) of \(trust.additionalRoots.count) is not a DER certificate (\(error))")
            }
            guard CertificateNames.isSelfIssued(der) == true else {
                throw ServerTrustError(
                    "root certificate \(index + 1) of \(trust.additionalRoots.count) is not a root (its issuer is another "
                        + "certificate): AsyncHTTPClient anchors trust at roots only, since NIOSSL has no partial-chain setting; "
                        + "trust the root that issued it")
            }
        }
        if trust.excludesSystemRoots {
            guard !roots.isEmpty else { throw ServerTrustError("excludesSystemRoots with no roots of your own would trust no server") }
            tls.trustRoots = .certificates(roots)
            tls.additionalTrustRoots = []
        } else if !roots.isEmpty {
            tls.additionalTrustRoots.append(.certificates(roots))
        }
        if let identity { try Self.present(identity, in: &tls) }
        configuration.tlsConfiguration = tls
        if let proxy {
            try ClientRoutes.check(proxy)
            // The settings decide every route: bypassed hosts go direct, not through a
            // proxy of the configuration's own.
            configuration.proxy = nil
        }
        let pins = try ClientRoutes.digests(of: trust)
        // Catena follows redirects, each hop on its own route: a client following them
        // itself would take a hop to a pinned host, or a bypassed one, the wrong way.
        let routed = !pins.isEmpty || proxy != nil || !connectTo.isEmpty
        if routed { configuration.redirectConfiguration = .disallow }
        let routes = routed ? ClientRoutes(base: ExchangeWatch.watching(configuration), proxies: proxy, pins: pins, overrides: connectTo) : nil
        self.init(configuration: configuration, routes: routes, timeout: timeout)
    }

    /// Puts `identity`'s certificate chain and key into `tls`, checked: NIOSSL builds a
    /// context from them here, which fails for a key that does not match the certificate.
    private static func present(_ identity: ClientIdentity, in tls: inout TLSConfiguration) throws(ServerTrustError) {
        do {
            switch identity.contents {
            case .pem(let chain, let key):
                tls.certificateChain = try NIOSSLCertificate.fromPEMBytes(Array(chain.utf8)).map { .certificate($0) }
                tls.privateKey = .privateKey(try NIOSSLPrivateKey(bytes: Array(key.utf8), format: .pem))
            case .der(let chain, let key):
                tls.certificateChain = try chain.map { .certificate(try NIOSSLCertificate(bytes: Array($0), format: .der)) }
                tls.privateKey = .privateKey(try NIOSSLPrivateKey(bytes: Array(key), format: .der))
            case .pkcs12(let bundle, let password):
                let opened = try NIOSSLPKCS12Bundle(buffer: Array(bundle), passphrase: Array(password.utf8))
                tls.certificateChain = opened.certificateChain.map { .certificate($0) }
                tls.privateKey = .privateKey(opened.privateKey)
            }
        } catch {
            // NIOSSL's errors name the OpenSSL reason, never the key or the password.
            throw ServerTrustError("the client identity (\(identity)) does not read: \(error)")
        }
        guard !tls.certificateChain.isEmpty else { throw ServerTrustError("the client identity (\(identity)) holds no certificate") }
        do {
            _ = try NIOSSLContext(configuration: tls)
        } catch {
            throw ServerTrustError("the client identity (\(identity)) cannot be used: its key may not match its certificate (\(error))")
        }
    }
}
#endif  // AsyncHTTPClient
