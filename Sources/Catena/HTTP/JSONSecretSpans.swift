import Foundation

/// Finds, in JSON text, the byte ranges of the values of members whose names are
/// secret, without decoding and re-encoding the document: a recording keeps every
/// other byte as it crossed the wire (a pretty-printed body of 53 bytes stays 53 bytes).
///
/// Written by hand because Foundation's JSON reader gives values, not where they are in
/// the text. The text must be JSON Foundation has already accepted; the scanner checks
/// its structure again as it goes and fails (nil) rather than guess, also past 64
/// levels of nesting or on text that is not ASCII-compatible (UTF-16 JSON).
package struct JSONSecretSpans {
    private let bytes: [UInt8]
    private let isSecret: (String) -> Bool
    private let isSecretText: (String) -> Bool
    private var index = 0
    private var spans: [Range<Int>] = []

    /// The ranges of secret values in `bytes`, in order and not overlapping (a secret
    /// inside a secret is covered by the outer one); nil when the text is not read.
    /// `isSecret` judges member names; `isSecretText` the decoded text of every string
    /// written with escapes (a server's encoder may write a secret it echoes as
    /// `p\u0026ss`, which a search of the raw text for `p&ss` misses) or holding `=`.
    package static func find(
        in bytes: [UInt8], isSecret: @escaping (String) -> Bool, isSecretText: @escaping (String) -> Bool = { _ in false }
    ) -> [Range<Int>]? {
        var scanner = JSONSecretSpans(bytes: bytes, isSecret: isSecret, isSecretText: isSecretText)
        guard scanner.value(depth: 0) else { return nil }
        scanner.skipWhitespace()
        guard scanner.index == bytes.count else { return nil }
        var kept: [Range<Int>] = []
        for span in scanner.spans.sorted(by: { $0.lowerBound < $1.lowerBound }) where kept.last.map({ span.lowerBound >= $0.upperBound }) ?? true {
            kept.append(span)
        }
        return kept
    }

    /// `bytes` with each of `spans` replaced by `replacement`.
    package static func replacing(_ spans: [Range<Int>], in bytes: [UInt8], with replacement: [UInt8]) -> [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(bytes.count)
        var start = 0
        for span in spans {
            result += bytes[start..<span.lowerBound]
            result += replacement
            start = span.upperBound
        }
        return result + bytes[start...]
    }

    private init(bytes: [UInt8], isSecret: @escaping (String) -> Bool, isSecretText: @escaping (String) -> Bool) {
        self.bytes = bytes
        self.isSecret = isSecret
        self.isSecretText = isSecretText
    }

    private mutating func skipWhitespace() {
        while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x09 || bytes[index] == 0x0A || bytes[index] == 0x0D {
            index += 1
        }
    }

    private func peek(_ byte: UInt8) -> Bool { index < bytes.count && bytes[index] == byte }

    /// Reads one value; false when the text is not a value here.
    private mutating func value(depth: Int) -> Bool {
        guard depth < 64 else { return false }
        skipWhitespace()
        guard index < bytes.count else { return false }
        switch bytes[index] {
        case UInt8(ascii: "{"):
            index += 1
            skipWhitespace()
            if peek(UInt8(ascii: "}")) {
                index += 1
                return true
            }
            while true {
                skipWhitespace()
                guard let name = string() else { return false }
                skipWhitespace()
                guard peek(UInt8(ascii: ":")) else { return false }
                index += 1
                skipWhitespace()
                let start = index
                guard value(depth: depth + 1) else { return false }
                if isSecret(decoded(name)) { spans.append(start..<index) }
                skipWhitespace()
                guard index < bytes.count else { return false }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                } else if bytes[index] == UInt8(ascii: "}") {
                    index += 1
                    return true
                } else {
                    return false
                }
            }
        case UInt8(ascii: "["):
            index += 1
            skipWhitespace()
            if peek(UInt8(ascii: "]")) {
                index += 1
                return true
            }
            while true {
                guard value(depth: depth + 1) else { return false }
                skipWhitespace()
                guard index < bytes.count else { return false }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                } else if bytes[index] == UInt8(ascii: "]") {
                    index += 1
                    return true
                } else {
                    return false
                }
            }
        case UInt8(ascii: "\""):
            guard let range = string() else { return false }
            // Judged when written with escapes, or when it may be a URL with a query or
            // user info (`verification_uri_complete`'s `?user_code=…`).
            let judged = bytes[range].contains { $0 == UInt8(ascii: "\\") || $0 == UInt8(ascii: "=") || $0 == UInt8(ascii: "@") }
            if judged, isSecretText(decoded(range)) { spans.append(range) }
            return true
        default:
            // A number, true, false or null: up to the next delimiter.
            let start = index
            while index < bytes.count {
                let byte = bytes[index]
                guard byte != UInt8(ascii: ","), byte != UInt8(ascii: "]"), byte != UInt8(ascii: "}"),
                    byte != 0x20, byte != 0x09, byte != 0x0A, byte != 0x0D, byte < 0x80, byte != UInt8(ascii: "\"")
                else { break }
                index += 1
            }
            return index > start
        }
    }

    /// Reads a string; its range, quotes included.
    private mutating func string() -> Range<Int>? {
        guard peek(UInt8(ascii: "\"")) else { return nil }
        let start = index
        index += 1
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "\\"): index += 2
            case UInt8(ascii: "\""):
                index += 1
                return start..<index
            default: index += 1
            }
        }
        index = bytes.count
        return nil
    }

    /// A string as its reader sees it: escapes decoded ("pass\u0077ord" is "password",
    /// by Foundation's reader); as written when it does not decode.
    private func decoded(_ range: Range<Int>) -> String {
        let inner = bytes[(range.lowerBound + 1)..<(range.upperBound - 1)]
        guard inner.contains(UInt8(ascii: "\\")) else { return String(decoding: inner, as: UTF8.self) }
        let decoded = try? JSONSerialization.jsonObject(with: Data(bytes[range]), options: [.fragmentsAllowed])
        return decoded as? String ?? String(decoding: inner, as: UTF8.self)
    }
}
