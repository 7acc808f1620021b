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
    /// A value to replace: a string (or, from a server's echo, any text) or a number,
    /// so that the replacement keeps the document's types.
    package struct Span: Equatable, Sendable {
        package var range: Range<Int>
        package var isNumber: Bool
    }

    private let bytes: [UInt8]
    private let isSecret: (String) -> Bool
    private let isSecretText: (String) -> Bool
    private var index = 0
    private var spans: [Span] = []
    /// How many secret members the scanner is inside: their leaves are secrets.
    private var secretDepth = 0
    /// Whether the secret member being read names URLs (`…_endpoint`, `…_uri`, `…_url`).
    private var inURLMember = false

    /// The secret values in `bytes`, in order and not overlapping; nil when the text is
    /// not read. A secret member's value keeps its shape: inside an object or array only
    /// the strings and numbers are secrets, so member names and types stay (a recording
    /// decodes with the same models). A secret member named for an address (`…_endpoint`,
    /// `…_uri`, `…_url`) whose value is an http(s) URL is judged by `isSecretText` (its
    /// query and user info), not by its name (`authorization_endpoint` in OAuth metadata).
    /// `isSecret` judges member names; `isSecretText` the decoded text of every string
    /// written with escapes (a server's encoder may write a secret it echoes as
    /// `p\u0026ss`, which a search of the raw text for `p&ss` misses) or holding `=`.
    package static func find(
        in bytes: [UInt8], isSecret: @escaping (String) -> Bool, isSecretText: @escaping (String) -> Bool = { _ in false }
    ) -> [Span]? {
        var scanner = JSONSecretSpans(bytes: bytes, isSecret: isSecret, isSecretText: isSecretText)
        guard scanner.value(depth: 0) else { return nil }
        scanner.skipWhitespace()
        guard scanner.index == bytes.count else { return nil }
        var kept: [Span] = []
        for span in scanner.spans.sorted(by: { $0.range.lowerBound < $1.range.lowerBound })
        where kept.last.map({ span.range.lowerBound >= $0.range.upperBound }) ?? true {
            kept.append(span)
        }
        return kept
    }

    /// `bytes` with each string span replaced by `replacement` and each number by `0`.
    package static func replacing(_ spans: [Span], in bytes: [UInt8], with replacement: [UInt8]) -> [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(bytes.count)
        var start = 0
        for span in spans {
            result += bytes[start..<span.range.lowerBound]
            result += span.isNumber ? [UInt8(ascii: "0")] : replacement
            start = span.range.upperBound
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
                let memberName = decoded(name)
                let secret = isSecret(memberName)
                let outerURLMember = inURLMember
                if secret {
                    secretDepth += 1
                    inURLMember = Self.namesURL(memberName)
                }
                guard value(depth: depth + 1) else { return false }
                if secret {
                    secretDepth -= 1
                    inURLMember = outerURLMember
                }
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
            if secretDepth > 0, !(inURLMember && isWebURL(range)) || isSecretText(decoded(range)) {
                spans.append(Span(range: range, isNumber: false))
            } else if judged, isSecretText(decoded(range)) {
                spans.append(Span(range: range, isNumber: false))
            }
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
            // Inside a secret, a number is one; true, false and null say nothing.
            if secretDepth > 0, index > start, bytes[start] == UInt8(ascii: "-") || (0x30...0x39).contains(bytes[start]) {
                spans.append(Span(range: start..<index, isNumber: true))
            }
            return index > start
        }
    }

    /// Whether a member's name says its value is an address (`authorization_endpoint`,
    /// `redirect_uri`, `token_url`): such a URL is a secret by its query, not its name;
    /// any other secret name's URL (`reset_token`, `secret_link`) stays one whole.
    private static func namesURL(_ name: String) -> Bool {
        let lowered = name.lowercased()
        return ["endpoint", "uri", "url", "uris", "urls"].contains { lowered.hasSuffix($0) }
    }

    /// Whether the string at `range` is an http or https URL.
    private func isWebURL(_ range: Range<Int>) -> Bool {
        let text = decoded(range).lowercased()
        return text.hasPrefix("https://") || text.hasPrefix("http://")
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
