package import Foundation

/// Just enough DER (X.690) to tell whether a certificate is a root: its issuer and
/// subject are the same name. Written by hand because the core has no ASN.1 library
/// and this is one comparison; swift-certificates would bring swift-asn1 and
/// swift-crypto into every dependent's build. Bounded: every length is checked against
/// what is left, and nothing is allocated but the two names' slices.
package enum CertificateNames {
    /// Whether `der` is a certificate whose issuer and subject are byte-for-byte the
    /// same name; `nil` when it does not parse as a certificate.
    package static func isSelfIssued(_ der: Data) -> Bool? {
        let bytes = [UInt8](der)
        guard let certificate = element(bytes, at: 0), certificate.tag == 0x30, certificate.end == bytes.count,
            let tbs = element(bytes, at: certificate.contentStart), tbs.tag == 0x30
        else { return nil }
        var position = tbs.contentStart
        // [0] EXPLICIT version, when present.
        if let version = element(bytes, at: position, within: tbs.end), version.tag == 0xa0 { position = version.end }
        // serialNumber INTEGER, signature AlgorithmIdentifier, issuer Name, validity, subject Name.
        var fields: [Element] = []
        for expected: UInt8 in [0x02, 0x30, 0x30, 0x30, 0x30] {
            guard let field = element(bytes, at: position, within: tbs.end), field.tag == expected else { return nil }
            fields.append(field)
            position = field.end
        }
        let issuer = fields[2], subject = fields[4]
        return bytes[issuer.start..<issuer.end] == bytes[subject.start..<subject.end]
    }

    struct Element {
        let tag: UInt8
        let start: Int
        let contentStart: Int
        let end: Int
    }

    /// The DER element at `offset`, which must end by `limit`: a single-byte tag and a
    /// definite length of at most four bytes.
    static func element(_ bytes: [UInt8], at offset: Int, within limit: Int? = nil) -> Element? {
        let limit = min(limit ?? bytes.count, bytes.count)
        guard offset >= 0, offset + 2 <= limit else { return nil }
        let tag = bytes[offset]
        guard tag & 0x1f != 0x1f else { return nil }  // multi-byte tags: never in these fields
        var position = offset + 1
        let first = bytes[position]
        position += 1
        var length = 0
        if first < 0x80 {
            length = Int(first)
        } else {
            let count = Int(first & 0x7f)
            guard (1...4).contains(count), position + count <= limit else { return nil }  // 0x80: indefinite, not DER
            for byte in bytes[position..<position + count] { length = length << 8 | Int(byte) }
            position += count
        }
        guard length <= limit - position else { return nil }
        return Element(tag: tag, start: offset, contentStart: position, end: position + length)
    }
}
