/// Percent-encoding by byte class, per RFC 3986. Internal: callers use the request
/// builders, which encode each path component and query item on its own.
enum PercentEncoding {
    /// Characters that may stand unencoded in a path segment (RFC 3986 `pchar`), less
    /// ";". "/" is not among them: a component never adds a segment boundary. Nor is
    /// ";": servers such as Tomcat and Spring read it as the start of path parameters,
    /// so a component "..;" would reach them as ".." and climb out of the path.
    static let pathSegment = ByteSet(unreservedPlus: "!$&'()*+,=:@")
    /// Characters that may stand unencoded in a query name or value. Deliberately
    /// narrow: "+", "&", "=", "/" and "?" are always encoded, so a value can never
    /// change the shape of the query or be read as a space by a form decoder.
    static let queryComponent = ByteSet(unreservedPlus: "")

    struct ByteSet: Sendable {
        private var bits: (UInt64, UInt64) = (0, 0)

        init(unreservedPlus extra: String) {
            let unreserved = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
            for byte in (unreserved + extra).utf8 { insert(byte) }
        }

        private mutating func insert(_ byte: UInt8) {
            if byte < 64 { bits.0 |= 1 << UInt64(byte) } else { bits.1 |= 1 << UInt64(byte - 64) }
        }

        func contains(_ byte: UInt8) -> Bool {
            if byte < 64 { return bits.0 & (1 << UInt64(byte)) != 0 }
            if byte < 128 { return bits.1 & (1 << UInt64(byte - 64)) != 0 }
            return false
        }
    }

    private static let hex: [UInt8] = Array("0123456789ABCDEF".utf8)

    /// Encodes every byte of `string`'s UTF-8 that `allowed` does not contain.
    /// `spaceAsPlus` writes " " as "+" (application/x-www-form-urlencoded).
    static func encode(_ string: String, allowing allowed: ByteSet, spaceAsPlus: Bool = false) -> String {
        let utf8 = string.utf8
        if utf8.allSatisfy(allowed.contains) { return string }
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count * 3)
        for byte in utf8 {
            if allowed.contains(byte) {
                out.append(byte)
            } else if spaceAsPlus && byte == UInt8(ascii: " ") {
                out.append(UInt8(ascii: "+"))
            } else {
                out.append(UInt8(ascii: "%"))
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0x0F)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes "%XX" escapes (and "+" as space when asked). Returns nil for a malformed
    /// escape or bytes that are not UTF-8.
    static func decode(_ string: Substring, plusAsSpace: Bool = false) -> String? {
        var out: [UInt8] = []
        out.reserveCapacity(string.utf8.count)
        var iterator = string.utf8.makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "%"):
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue)
                else { return nil }
                out.append(high << 4 | low)
            case UInt8(ascii: "+") where plusAsSpace:
                out.append(UInt8(ascii: " "))
            default:
                out.append(byte)
            }
        }
        return String(validating: out, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        default: nil
        }
    }
}
