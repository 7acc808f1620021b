/// A reader for the parts of HTTP structured fields (RFC 9651) that rate-limit fields
/// use: lists and dictionaries of items with parameters.
///
/// Written here rather than taken from swift-http-structured-headers so that the core
/// module keeps its two dependencies; it only reads, and it reads linearly. A field
/// that breaks the grammar anywhere yields nil, which RFC 9651 §4.2 says means the
/// whole field is ignored.
package enum StructuredField {
    /// An item's value. Dates, display strings and byte sequences are read and kept
    /// only as ``other`` or their text: nothing here needs them.
    package enum Value: Equatable, Sendable {
        case integer(Int64)
        case decimal(Double)
        case string(String)
        case token(String)
        case bytes(String)
        case boolean(Bool)
        /// An inner list, a date or a display string.
        case other

        /// The value as a number, when it is one.
        package var number: Double? {
            switch self {
            case .integer(let value): Double(value)
            case .decimal(let value): value
            default: nil
            }
        }

        /// The value as text: a string's, a token's, or a byte sequence's base64.
        package var text: String? {
            switch self {
            case .string(let value), .token(let value), .bytes(let value): value
            default: nil
            }
        }
    }

    /// A value with its parameters, in the order sent.
    package struct Item: Equatable, Sendable {
        package var value: Value
        package var parameters: [(key: String, value: Value)]

        /// The last parameter named `key` (a repeated key's last value wins).
        package func parameter(_ key: String) -> Value? {
            parameters.last { $0.key == key }?.value
        }

        package static func == (lhs: Item, rhs: Item) -> Bool {
            lhs.value == rhs.value && lhs.parameters.elementsEqual(rhs.parameters) { $0.key == $1.key && $0.value == $1.value }
        }
    }

    /// The members of a list field, or nil when the field is malformed.
    package static func list(_ text: String) -> [Item]? {
        var reader = Reader(Array(text.utf8))
        return reader.list()
    }

    /// The members of a dictionary field, in order (a repeated key keeps its last
    /// value), or nil when the field is malformed.
    package static func dictionary(_ text: String) -> [(key: String, item: Item)]? {
        var reader = Reader(Array(text.utf8))
        return reader.dictionary()
    }

    /// Longer fields are not read: no rate-limit field comes near it.
    package static let maximumLength = 16 * 1024

    private struct Reader {
        let bytes: [UInt8]
        var index = 0

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        private var atEnd: Bool { index >= bytes.count }
        private var current: UInt8? { index < bytes.count ? bytes[index] : nil }

        private mutating func skip(_ accepted: (UInt8) -> Bool) {
            while let byte = current, accepted(byte) { index += 1 }
        }
        private mutating func skipSpaces() { skip { $0 == 0x20 } }
        private mutating func skipWhitespace() { skip { $0 == 0x20 || $0 == 0x09 } }

        mutating func list() -> [Item]? {
            guard bytes.count <= StructuredField.maximumLength else { return nil }
            skipSpaces()
            var members: [Item] = []
            while !atEnd {
                guard let member = itemOrInnerList() else { return nil }
                members.append(member)
                guard separator() else { return nil }
            }
            return members
        }

        mutating func dictionary() -> [(key: String, item: Item)]? {
            guard bytes.count <= StructuredField.maximumLength else { return nil }
            skipSpaces()
            var members: [(key: String, item: Item)] = []
            while !atEnd {
                guard let key = key() else { return nil }
                let member: Item
                if current == UInt8(ascii: "=") {
                    index += 1
                    guard let item = itemOrInnerList() else { return nil }
                    member = item
                } else {
                    guard let parameters = parameters() else { return nil }
                    member = Item(value: .boolean(true), parameters: parameters)
                }
                if let existing = members.firstIndex(where: { $0.key == key }) { members.remove(at: existing) }
                members.append((key, member))
                guard separator() else { return nil }
            }
            return members
        }

        /// After a member: the end, or a comma with another member after it.
        private mutating func separator() -> Bool {
            skipWhitespace()
            if atEnd { return true }
            guard current == UInt8(ascii: ",") else { return false }
            index += 1
            skipWhitespace()
            return !atEnd
        }

        private mutating func itemOrInnerList() -> Item? {
            guard current == UInt8(ascii: "(") else { return item() }
            index += 1
            while true {
                skipSpaces()
                if current == UInt8(ascii: ")") {
                    index += 1
                    guard let parameters = parameters() else { return nil }
                    return Item(value: .other, parameters: parameters)
                }
                guard item() != nil, let next = current, next == 0x20 || next == UInt8(ascii: ")") else { return nil }
            }
        }

        private mutating func item() -> Item? {
            guard let value = bareItem(), let parameters = parameters() else { return nil }
            return Item(value: value, parameters: parameters)
        }

        private mutating func parameters() -> [(key: String, value: Value)]? {
            var parameters: [(key: String, value: Value)] = []
            while current == UInt8(ascii: ";") {
                index += 1
                skipSpaces()
                guard let key = key() else { return nil }
                var value = Value.boolean(true)
                if current == UInt8(ascii: "=") {
                    index += 1
                    guard let bare = bareItem() else { return nil }
                    value = bare
                }
                parameters.append((key, value))
            }
            return parameters
        }

        private mutating func key() -> String? {
            guard let first = current, Self.isLowercaseLetter(first) || first == UInt8(ascii: "*") else { return nil }
            let start = index
            skip { Self.isLowercaseLetter($0) || Self.isDigit($0) || "_-.*".utf8.contains($0) }
            return String(decoding: bytes[start..<index], as: UTF8.self)
        }

        private mutating func bareItem() -> Value? {
            guard let first = current else { return nil }
            switch first {
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return number()
            case UInt8(ascii: "\""): return string().map(Value.string)
            case UInt8(ascii: ":"): return byteSequence()
            case UInt8(ascii: "?"):
                index += 1
                guard let bit = current, bit == UInt8(ascii: "0") || bit == UInt8(ascii: "1") else { return nil }
                index += 1
                return .boolean(bit == UInt8(ascii: "1"))
            case UInt8(ascii: "@"):
                index += 1
                guard case .integer = number() else { return nil }
                return .other
            case UInt8(ascii: "%"):
                index += 1
                guard current == UInt8(ascii: "\""), string() != nil else { return nil }
                return .other
            case UInt8(ascii: "*"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"):
                let start = index
                index += 1
                skip { Self.isTokenCharacter($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: "/") }
                return .token(String(decoding: bytes[start..<index], as: UTF8.self))
            default: return nil
            }
        }

        /// RFC 9651 §4.2.4: at most 15 integer digits, or 12 and at most 3 decimals.
        private mutating func number() -> Value? {
            var negative = false
            if current == UInt8(ascii: "-") {
                negative = true
                index += 1
            }
            let start = index
            skip(Self.isDigit)
            let integerDigits = index - start
            guard integerDigits > 0 else { return nil }
            var value: Int64 = 0
            for byte in bytes[start..<index].prefix(16) { value = value * 10 + Int64(byte - UInt8(ascii: "0")) }
            guard current == UInt8(ascii: ".") else {
                guard integerDigits <= 15 else { return nil }
                return .integer(negative ? -value : value)
            }
            index += 1
            let fractionStart = index
            skip(Self.isDigit)
            let fractionDigits = index - fractionStart
            guard integerDigits <= 12, (1...3).contains(fractionDigits) else { return nil }
            var fraction = 0.0
            for byte in bytes[fractionStart..<index].reversed() { fraction = (fraction + Double(byte - UInt8(ascii: "0"))) / 10 }
            let decimal = Double(value) + fraction
            return .decimal(negative ? -decimal : decimal)
        }

        private mutating func string() -> String? {
            index += 1  // the opening quote
            var text: [UInt8] = []
            while let byte = current {
                index += 1
                switch byte {
                case UInt8(ascii: "\""):
                    return String(decoding: text, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    guard let escaped = current, escaped == UInt8(ascii: "\"") || escaped == UInt8(ascii: "\\") else { return nil }
                    index += 1
                    text.append(escaped)
                case 0x20...0x7E:
                    text.append(byte)
                default:
                    return nil
                }
            }
            return nil
        }

        private mutating func byteSequence() -> Value? {
            index += 1
            let start = index
            skip { Self.isLetter($0) || Self.isDigit($0) || "+/=".utf8.contains($0) }
            guard current == UInt8(ascii: ":") else { return nil }
            let text = String(decoding: bytes[start..<index], as: UTF8.self)
            index += 1
            return .bytes(text)
        }

        private static func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }
        private static func isLowercaseLetter(_ byte: UInt8) -> Bool { (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) }
        private static func isLetter(_ byte: UInt8) -> Bool { isLowercaseLetter(byte | 0x20) }
        private static func isTokenCharacter(_ byte: UInt8) -> Bool {
            isLetter(byte) || isDigit(byte) || "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }
}
