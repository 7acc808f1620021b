public import Foundation

/// Which HTTPS servers a transport trusts: the system's roots, roots of your own
/// (a private CA), or only yours; and public-key pins per host.
///
/// One value for both transports; each says at setup what it cannot do, and refuses
/// the value rather than connect with less checking than asked for:
///
/// | | AsyncHTTPClient | URLSession on Linux | URLSession on Apple platforms |
/// |---|---|---|---|
/// | additional roots | yes | no (corelibs reads only the system store) | not yet |
/// | only your roots (pinning by trust anchor) | yes | no | not yet |
/// | an intermediate or leaf as a root | no: refused (no partial-chain setting in NIOSSL) | no | not yet |
/// | public-key pins | yes: the leaf's key, per new connection | no | not yet |
///
/// ```swift
/// let trust = try ServerTrust(additionalRootsPEM: String(contentsOfFile: "ca.pem"))
/// let transport = try AsyncHTTPClientTransport(trust: trust)
/// ```
///
/// A server that fails the check fails the request with
/// ``CatenaError/Code/untrustedServer`` before any request byte is sent.
public struct ServerTrust: Sendable, Equatable {
    /// Root certificates (DER) trusted besides, or instead of, the system's.
    public var additionalRoots: [Data]
    /// Trust only ``additionalRoots``: the system's roots are not consulted.
    public var excludesSystemRoots: Bool
    /// Per host name (lowercased), the base64 SHA-256 hashes of the SubjectPublicKeyInfo
    /// one of which the server's leaf certificate must carry (RFC 7469's `pin-sha256`
    /// values; curl's `sha256//` prefix is accepted). Name a backup key too, so a key
    /// rotation does not lock clients out. AsyncHTTPClient checks them; URLSession
    /// refuses them.
    public var publicKeyPins: [String: Set<String>]

    /// The system's roots only, no pins: what every transport does by default.
    public static let system = ServerTrust()

    /// Trust as described; see the type's documentation for what each transport does.
    public init(additionalRoots: [Data] = [], excludesSystemRoots: Bool = false, publicKeyPins: [String: Set<String>] = [:]) {
        self.additionalRoots = additionalRoots
        self.excludesSystemRoots = excludesSystemRoots
        self.publicKeyPins = Dictionary(publicKeyPins.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { $0.union($1) })
    }

    /// Trust the certificates in `pem` (one or more `BEGIN CERTIFICATE` blocks) besides,
    /// or instead of, the system's roots.
    ///
    /// - Throws: ``ServerTrustError`` naming the block that is not a certificate, or
    ///   when there is none.
    public init(additionalRootsPEM pem: String, excludesSystemRoots: Bool = false) throws(ServerTrustError) {
        self.init(additionalRoots: try Self.certificates(fromPEM: pem), excludesSystemRoots: excludesSystemRoots)
    }

    /// Whether this is the default: the system's roots and nothing else.
    public var isSystemDefault: Bool { self == .system }

    /// The DER bytes of each `BEGIN CERTIFICATE` block in `pem`, in order.
    public static func certificates(fromPEM pem: String) throws(ServerTrustError) -> [Data] {
        guard pem.utf8.count <= 4 * 1024 * 1024 else { throw ServerTrustError("the PEM text is over 4 MiB") }
        let begin = "-----BEGIN CERTIFICATE-----", end = "-----END CERTIFICATE-----"
        var certificates: [Data] = []
        var rest = Substring(pem)
        while let start = rest.range(of: begin) {
            guard let stop = rest[start.upperBound...].range(of: end) else {
                throw ServerTrustError("certificate \(certificates.count + 1) in the PEM text has no END line")
            }
            let body = rest[start.upperBound..<stop.lowerBound].filter { !$0.isWhitespace }
            guard let der = Data(base64Encoded: String(body)), der.first == 0x30 else {
                throw ServerTrustError("certificate \(certificates.count + 1) in the PEM text is not base64 DER")
            }
            certificates.append(der)
            rest = rest[stop.upperBound...]
        }
        guard !certificates.isEmpty else { throw ServerTrustError("the PEM text holds no BEGIN CERTIFICATE block") }
        return certificates
    }
}

/// Trust settings that cannot be used: a malformed certificate, or something the
/// transport cannot check (it refuses at setup instead of checking less).
public struct ServerTrustError: Error, Sendable, CustomStringConvertible {
    /// What was wrong.
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}
