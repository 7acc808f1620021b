import RawStructuredFieldValues

/// The lists and dictionaries of HTTP structured fields (RFC 9651) that rate-limit
/// fields use, read by apple/swift-http-structured-headers and reduced to the few
/// shapes the limiter reads. A field that breaks the grammar anywhere yields nil, which
/// RFC 9651 §4.2 says means the whole field is ignored.
package enum StructuredField {
    /// An item's value. Dates and display strings are kept only as ``other``.
    package enum Value: Equatable, Sendable {
        case integer(Int64)
        case decimal(Double)
        case string(String)
        case token(String)
        case bytes(String)
        case boolean(Bool)
        /// An inner list, a date or a display string.
        case other

        init(_ item: RFC9651BareItem) {
            switch item {
            case .integer(let value): self = .integer(value)
            case .decimal(let value): self = .decimal(Double(value))
            case .string(let value): self = .string(value)
            case .token(let value): self = .token(value)
            case .undecodedByteSequence(let value): self = .bytes(value)
            case .bool(let value): self = .boolean(value)
            case .date, .displayString: self = .other
            }
        }

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

    /// A value with its parameters, in the order sent (a repeated key keeps its last value).
    package struct Item: Sendable {
        package var value: Value
        package var parameters: [(key: String, value: Value)]

        init(_ member: ItemOrInnerList) {
            switch member {
            case .item(let item):
                value = Value(item.rfc9651BareItem)
                parameters = item.rfc9651Parameters.map { ($0.0, Value($0.1)) }
            case .innerList(let list):
                value = .other
                parameters = list.rfc9651Parameters.map { ($0.0, Value($0.1)) }
            }
        }

        /// The parameter named `key`.
        package func parameter(_ key: String) -> Value? {
            parameters.last { $0.key == key }?.value
        }
    }

    /// Longer fields are not read: no rate-limit field comes near it.
    package static let maximumLength = 16 * 1024

    /// The members of a list field, or nil when the field is malformed.
    package static func list(_ text: String) -> [Item]? {
        guard text.utf8.count <= maximumLength else { return nil }
        var parser = StructuredFieldValueParser(Array(text.utf8))
        return (try? parser.parseListFieldValue())?.map(Item.init)
    }

    /// The members of a dictionary field, in order, or nil when the field is malformed.
    package static func dictionary(_ text: String) -> [(key: String, item: Item)]? {
        guard text.utf8.count <= maximumLength else { return nil }
        var parser = StructuredFieldValueParser(Array(text.utf8))
        return (try? parser.parseDictionaryFieldValue())?.map { ($0.0, Item($0.1)) }
    }
}
