public import Foundation

/// A client certificate and its private key, presented when a server asks for one
/// (mutual TLS): from PEM text, from DER, or from a PKCS #12 bundle and its password.
///
/// ```swift
/// let identity = ClientIdentity(
///     certificateChainPEM: try String(contentsOfFile: "client.pem", encoding: .utf8),
///     privateKeyPEM: try String(contentsOfFile: "client.key", encoding: .utf8))
/// let transport = try AsyncHTTPClientTransport(trust: .system, identity: identity)
/// ```
///
/// The transport reads and checks it at setup: a certificate that does not parse, or a
/// key that does not match the certificate, is refused there with ``ServerTrustError``,
/// not at the first handshake. `AsyncHTTPClientTransport` presents it over HTTP/1.1 and
/// HTTP/2; `URLSessionTransport` refuses it for now (corelibs Foundation on Linux has no
/// way to hand libcurl a client certificate). Its description never shows the key or the
/// password.
public struct ClientIdentity: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// How the certificate and key are given. Its description, like the identity's,
    /// names the format only.
    public enum Contents: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
        /// PEM text: the certificate chain, leaf first, and the unencrypted private key.
        case pem(certificateChain: String, privateKey: String)
        /// DER: the certificate chain, leaf first, and the private key.
        case der(certificateChain: [Data], privateKey: Data)
        /// A PKCS #12 bundle (`.p12`, `.pfx`) and the password that opens it.
        case pkcs12(Data, password: String)

        /// The format alone, never the key or the password.
        public var description: String {
            switch self {
            case .pem: "PEM"
            case .der(let chain, _): "DER, \(chain.count) certificates"
            case .pkcs12(let bundle, _): "PKCS #12, \(bundle.count) bytes"
            }
        }

        public var debugDescription: String { description }

        /// No children: `dump` and mirrors show the description, not the key.
        public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .enum) }
    }

    /// The certificate and key as given.
    public let contents: Contents

    /// An identity from PEM text: the certificate chain (leaf first) and the private key.
    public init(certificateChainPEM: String, privateKeyPEM: String) {
        contents = .pem(certificateChain: certificateChainPEM, privateKey: privateKeyPEM)
    }

    /// An identity from DER: the certificate chain (leaf first) and the private key.
    public init(certificateChainDER: [Data], privateKeyDER: Data) {
        contents = .der(certificateChain: certificateChainDER, privateKey: privateKeyDER)
    }

    /// An identity from a PKCS #12 bundle and its password.
    public init(pkcs12: Data, password: String) {
        contents = .pkcs12(pkcs12, password: password)
    }

    /// The format alone: "ClientIdentity(PEM)", never the key or the password.
    public var description: String { "ClientIdentity(\(contents))" }

    public var debugDescription: String { description }

    /// No children: `dump` and mirrors show the description, not the key.
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
