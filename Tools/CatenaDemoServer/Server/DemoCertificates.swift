#if DemoServer
import Catena
import Crypto
public import Foundation
import SwiftASN1
import X509

/// A throwaway certificate authority made at start-up, for serving the demo API over
/// TLS without a system-wide install: trust its ``certificatePEM`` through Catena's
/// own API (``Catena/ServerTrust``) and every certificate it issues is trusted.
///
/// The private key lives in memory only. Nothing here is fit for production: it is
/// what tests and demos need to speak real TLS on 127.0.0.1.
public struct DemoCertificateAuthority: Sendable {
    /// The CA's certificate, PEM encoded: what a client adds to its trust roots.
    public let certificatePEM: String
    /// The CA's certificate, DER encoded.
    public let certificateDER: Data
    /// The intermediate certificates (DER) between this authority and its root, this
    /// one's first: what a server sends after its own certificate. Empty for a root.
    public let intermediatesDER: [Data]
    private let key: P256.Signing.PrivateKey
    private let name: DistinguishedName

    /// A new root authority with a fresh P-256 key, valid from an hour ago for 30 days.
    public init(commonName: String = "Catena Demo CA") throws {
        let key = P256.Signing.PrivateKey()
        let name = try DistinguishedName { CommonName(commonName) }
        let certificate = try Self.authorityCertificate(key: key, subject: name, issuer: name, issuerKey: key, maxPathLength: 1)
        try self.init(key: key, name: name, certificate: certificate, parents: nil)
    }

    /// `parents` nil for a root; otherwise the issuer's intermediates.
    private init(key: P256.Signing.PrivateKey, name: DistinguishedName, certificate: Certificate, parents: [Data]?) throws {
        self.key = key
        self.name = name
        let (pem, der) = try Self.encode(certificate)
        (certificatePEM, certificateDER) = (pem, der)
        intermediatesDER = parents.map { [der] + $0 } ?? []
    }

    /// An intermediate authority signed by this one: root → intermediate → leaf chains,
    /// for pinning tests. Its leaves carry it in their chain.
    public func intermediate(commonName: String = "Catena Demo Intermediate CA") throws -> DemoCertificateAuthority {
        let intermediateKey = P256.Signing.PrivateKey()
        let subject = try DistinguishedName { CommonName(commonName) }
        let certificate = try Self.authorityCertificate(key: intermediateKey, subject: subject, issuer: name, issuerKey: key, maxPathLength: 0)
        return try DemoCertificateAuthority(key: intermediateKey, name: subject, certificate: certificate, parents: intermediatesDER)
    }

    /// A CA certificate for `key`, valid from an hour ago for 30 days.
    private static func authorityCertificate(
        key: P256.Signing.PrivateKey, subject: DistinguishedName, issuer: DistinguishedName, issuerKey: P256.Signing.PrivateKey,
        maxPathLength: Int
    ) throws -> Certificate {
        let now = Date()
        return try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey),
            notValidBefore: now - 3_600, notValidAfter: now + 30 * 86_400,
            issuer: issuer, subject: subject, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: maxPathLength))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            },
            issuerPrivateKey: .init(issuerKey))
    }

    /// A server certificate for `hosts` (names, or IPv4/IPv6 literals), signed by this
    /// authority and valid over `validity` (by default from an hour ago for 30 days).
    /// An expired or not-yet-valid certificate, or one for other names, is what the
    /// trust tests need.
    public func issue(
        for hosts: [String] = ["localhost", "127.0.0.1", "::1"],
        validity: ClosedRange<Date>? = nil
    ) throws -> DemoServerCertificate {
        let leafKey = P256.Signing.PrivateKey()
        let now = Date()
        let validity = validity ?? (now - 3_600)...(now + 30 * 86_400)
        let names: [GeneralName] = hosts.map { host in
            if let address = IPAddress.bytes(of: host) { return .ipAddress(ASN1OctetString(contentBytes: address[...])) }
            return .dnsName(host)
        }
        let subject = try DistinguishedName { CommonName(hosts.first ?? "catena-demo") }
        let certificate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(leafKey.publicKey),
            notValidBefore: validity.lowerBound, notValidAfter: validity.upperBound,
            issuer: name, subject: subject, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames(names)
            },
            issuerPrivateKey: .init(key))
        return try issued(certificate, key: leafKey)
    }

    /// A client certificate (mutual TLS) for `name`, signed by this authority: what a
    /// server started with ``DemoTLS/clientAuthorityDER`` set to this authority accepts.
    public func issueClient(named name: String = "catena-client") throws -> DemoServerCertificate {
        let leafKey = P256.Signing.PrivateKey()
        let now = Date()
        let certificate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(leafKey.publicKey),
            notValidBefore: now - 3_600, notValidAfter: now + 30 * 86_400,
            issuer: self.name, subject: try DistinguishedName { CommonName(name) }, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.clientAuth])
            },
            issuerPrivateKey: .init(key))
        return try issued(certificate, key: leafKey)
    }

    /// `certificate` and its `key` as this authority hands them out.
    private func issued(_ certificate: Certificate, key: P256.Signing.PrivateKey) throws -> DemoServerCertificate {
        let (pem, der) = try Self.encode(certificate)
        let spki = Data(SHA256.hash(data: key.publicKey.derRepresentation))
        return DemoServerCertificate(
            certificatePEM: pem, certificateDER: der, privateKeyPEM: key.pemRepresentation,
            publicKeySHA256: spki.base64EncodedString(), intermediatesDER: intermediatesDER)
    }

    private static func encode(_ certificate: Certificate) throws -> (String, Data) {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return (try certificate.serializeAsPEM().pemString, Data(serializer.serializedBytes))
    }
}

/// A server's certificate and private key, issued by a ``DemoCertificateAuthority``.
public struct DemoServerCertificate: Sendable {
    /// The certificate, PEM encoded.
    public let certificatePEM: String
    /// The certificate, DER encoded.
    public let certificateDER: Data
    /// The private key, PEM encoded (PKCS #8).
    public let privateKeyPEM: String
    /// The base64 SHA-256 of the certificate's SubjectPublicKeyInfo: the value a
    /// public-key pin names.
    public let publicKeySHA256: String
    /// The intermediate certificates (DER) the server sends after this one.
    public let intermediatesDER: [Data]
}

#endif  // DemoServer
