public import Foundation
public import HTTPTypes

/// Encodes any `Encodable` value as name–value pairs: the query items of a request, or
/// the fields of an `application/x-www-form-urlencoded` body.
///
/// ```swift
/// struct Search: Encodable { let text: String; let tags: [String]; let since: Date?; let page: Page }
/// let request = try APIRequest(.get, path: ["search"], query: search, encoder: FormEncoder())
/// // text=swift&tags[]=http&tags[]=nio&page[number]=2&page[size]=20   (since: nil is left out)
/// let body = APIRequest.Body.form(search)
/// ```
///
/// Nested values become `outer[inner]` (or `outer.inner`); arrays follow
/// ``ArrayEncoding``; a nil optional is left out; dates follow ``DateEncoding``; `Data`
/// is base64; `URL` its absolute string. Names and values are percent-encoded later,
/// with the same strict rules as every query item and form field.
public struct FormEncoder: Sendable {
    /// How arrays are written.
    public enum ArrayEncoding: Sendable {
        /// `tags[]=a&tags[]=b` (Rails, PHP).
        case brackets
        /// `tags[0]=a&tags[1]=b`.
        case indexed
        /// `tags=a&tags=b` (most Go and Java servers).
        case repeatedName
        /// `tags=a,b`: only for arrays of plain values; nested ones fail to encode.
        case commaSeparated
    }

    /// How nested keys are written.
    public enum NestingEncoding: Sendable {
        /// `page[size]=20`.
        case brackets
        /// `page.size=20`.
        case dots
    }

    /// How dates are written.
    public enum DateEncoding: Sendable {
        /// `2026-11-22T14:48:01Z` (with fractional seconds when there are any).
        case iso8601
        /// Seconds since 1970, as a decimal number.
        case secondsSince1970
        /// Whole milliseconds since 1970.
        case millisecondsSince1970
        /// Your own text.
        case custom(@Sendable (Date) -> String)
    }

    /// How booleans are written.
    public enum BoolEncoding: Sendable {
        /// `true` / `false`.
        case literal
        /// `1` / `0`.
        case numeric
    }

    public var arrays: ArrayEncoding
    public var nesting: NestingEncoding
    public var dates: DateEncoding
    public var bools: BoolEncoding

    /// An encoder; the defaults are the most common server conventions.
    public init(
        arrays: ArrayEncoding = .brackets, nesting: NestingEncoding = .brackets,
        dates: DateEncoding = .iso8601, bools: BoolEncoding = .literal
    ) {
        self.arrays = arrays
        self.nesting = nesting
        self.dates = dates
        self.bools = bools
    }

    /// The pairs for `value`, in the order its `encode(to:)` wrote them.
    ///
    /// - Throws: `EncodingError.invalidValue` when `value` is a single plain value (a
    ///   form needs names), for non-finite numbers, and for nested values inside a
    ///   comma-separated array.
    public func encode<Value: Encodable>(_ value: Value) throws -> [(name: String, value: String)] {
        let root = NodeBox()
        try FormValueEncoder(options: self, box: root, codingPath: []).encode(value)
        guard case .object(let fields) = root.node else {
            throw EncodingError.invalidValue(
                value, .init(codingPath: [], debugDescription: "a form or query needs named fields: encode a struct or a dictionary"))
        }
        var pairs: [(name: String, value: String)] = []
        for (key, node) in fields { try flatten(node, name: key, into: &pairs, path: [key]) }
        return pairs
    }

    private func flatten(_ node: Node, name: String, into pairs: inout [(name: String, value: String)], path: [String]) throws {
        switch node {
        case .absent:
            return
        case .value(let text):
            pairs.append((name, text))
        case .object(let fields):
            for (key, child) in fields {
                let childName = nesting == .brackets ? "\(name)[\(key)]" : "\(name).\(key)"
                try flatten(child, name: childName, into: &pairs, path: path + [key])
            }
        case .array(let items):
            switch arrays {
            case .brackets:
                for item in items { try flatten(item, name: name + "[]", into: &pairs, path: path) }
            case .indexed:
                for (index, item) in items.enumerated() {
                    try flatten(item, name: nesting == .brackets ? "\(name)[\(index)]" : "\(name).\(index)", into: &pairs, path: path)
                }
            case .repeatedName:
                for item in items { try flatten(item, name: name, into: &pairs, path: path) }
            case .commaSeparated:
                var texts: [String] = []
                for item in items {
                    switch item {
                    case .value(let text): texts.append(text)
                    case .absent: continue
                    default:
                        throw EncodingError.invalidValue(
                            name, .init(codingPath: [], debugDescription: "\(path.joined(separator: ".")): a comma-separated array holds plain values only"))
                    }
                }
                pairs.append((name, texts.joined(separator: ",")))
            }
        }
    }
}

extension APIRequest {
    /// A relative request whose query items are `query` encoded by `encoder`.
    public init(
        _ method: HTTPRequest.Method = .get, path: [String], query: some Encodable, encoder: FormEncoder = FormEncoder(),
        headerFields: HTTPFields = [:], body: Body = .empty
    ) throws(CatenaError) {
        try self.init(method, path: path, headerFields: headerFields, body: body)
        do {
            appendQueryItems(try encoder.encode(query).map { URLQueryItem(name: $0.name, value: $0.value) })
        } catch {
            throw CatenaError(
                .invalidRequest, request: self, underlyingError: error,
                detail: "the query (\(type(of: query))) does not encode: \(error)")
        }
    }
}

extension APIRequest.Body {
    /// `application/x-www-form-urlencoded` fields from any `Encodable`, encoded by
    /// `encoder` for each attempt (see ``FormEncoder``).
    public static func form<Value: Encodable & Sendable>(_ value: Value, encoder: FormEncoder = FormEncoder()) -> APIRequest.Body {
        APIRequest.Body(kind: "form (\(Value.self))", contentType: "application/x-www-form-urlencoded") {
            try form(encoder.encode(value)).producedData() ?? Data()
        }
    }
}

// MARK: - The Encoder

/// What one value encoded to.
private enum Node {
    case absent
    case value(String)
    case array([Node])
    case object([(String, Node)])
}

/// A node being built; containers hand out child boxes and read them back at the end.
private final class NodeBox {
    var node: Node = .absent
    var children: [(String, NodeBox)] = []
    var items: [NodeBox] = []
    var kind: Kind = .unset
    enum Kind { case unset, keyed, unkeyed, single }

    /// The finished tree.
    func resolve() -> Node {
        switch kind {
        case .keyed: .object(children.map { ($0.0, $0.1.resolve()) })
        case .unkeyed: .array(items.map { $0.resolve() })
        case .single, .unset: node
        }
    }
}

private struct FormValueEncoder: Encoder {
    let options: FormEncoder
    let box: NodeBox
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    /// Encodes `value` into `box`, then resolves the tree.
    func encode<Value: Encodable>(_ value: Value) throws {
        try encodeValue(value)
        box.node = box.resolve()
    }

    /// Encodes one value into `box`: plain values as text, others through their
    /// `encode(to:)`.
    func encodeValue<Value: Encodable>(_ value: Value) throws {
        if let text = try plainText(value) {
            box.kind = .single
            box.node = .value(text)
            return
        }
        try value.encode(to: self)
    }

    private func plainText<Value: Encodable>(_ value: Value) throws -> String? {
        switch value {
        case let date as Date:
            switch options.dates {
            case .iso8601:
                let formatter = ISO8601DateFormatter()
                if date.timeIntervalSince1970.truncatingRemainder(dividingBy: 1) != 0 {
                    formatter.formatOptions.insert(.withFractionalSeconds)
                }
                return formatter.string(from: date)
            case .secondsSince1970: return try number(date.timeIntervalSince1970)
            case .millisecondsSince1970: return try number((date.timeIntervalSince1970 * 1000).rounded())
            case .custom(let format): return format(date)
            }
        case let data as Data: return data.base64EncodedString()
        case let url as URL: return url.absoluteString
        case let decimal as Decimal: return decimal.description
        default: return nil
        }
    }

    func number(_ value: Double) throws -> String {
        guard value.isFinite else {
            throw EncodingError.invalidValue(value, .init(codingPath: codingPath, debugDescription: "\(value) has no form encoding"))
        }
        return value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }

    func bool(_ value: Bool) -> String {
        options.bools == .literal ? (value ? "true" : "false") : (value ? "1" : "0")
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        box.kind = .keyed
        return KeyedEncodingContainer(KeyedContainer<Key>(encoder: self))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        box.kind = .unkeyed
        return UnkeyedContainer(encoder: self)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        box.kind = .single
        return SingleContainer(encoder: self)
    }

    /// An encoder for a child stored in `child`.
    func child(_ child: NodeBox, key: any CodingKey) -> FormValueEncoder {
        FormValueEncoder(options: options, box: child, codingPath: codingPath + [key])
    }
}

private struct IndexKey: CodingKey {
    let intValue: Int?
    var stringValue: String { String(intValue ?? 0) }
    init(_ index: Int) { intValue = index }
    init?(stringValue: String) { nil }
    init?(intValue: Int) { self.intValue = intValue }
}

private struct KeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let encoder: FormValueEncoder
    var codingPath: [any CodingKey] { encoder.codingPath }

    private func add(_ key: Key) -> NodeBox {
        let child = NodeBox()
        encoder.box.children.append((key.stringValue, child))
        return child
    }

    private func set(_ text: String, for key: Key) {
        let child = add(key)
        child.kind = .single
        child.node = .value(text)
    }

    mutating func encodeNil(forKey key: Key) throws {}
    mutating func encode(_ value: Bool, forKey key: Key) throws { set(encoder.bool(value), for: key) }
    mutating func encode(_ value: String, forKey key: Key) throws { set(value, for: key) }
    mutating func encode(_ value: Double, forKey key: Key) throws { set(try encoder.number(value), for: key) }
    mutating func encode(_ value: Float, forKey key: Key) throws { set(try encoder.number(Double(value)), for: key) }
    mutating func encode(_ value: Int, forKey key: Key) throws { set(String(value), for: key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { set(String(value), for: key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { set(String(value), for: key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { set(String(value), for: key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { set(String(value), for: key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { set(String(value), for: key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { set(String(value), for: key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { set(String(value), for: key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { set(String(value), for: key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { set(String(value), for: key) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        try encoder.child(add(key), key: key).encodeValue(value)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        encoder.child(add(key), key: key).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        encoder.child(add(key), key: key).unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder {
        let child = NodeBox()
        encoder.box.children.append(("super", child))
        return encoder.child(child, key: IndexKey(0))
    }
    mutating func superEncoder(forKey key: Key) -> any Encoder { encoder.child(add(key), key: key) }
}

private struct UnkeyedContainer: UnkeyedEncodingContainer {
    let encoder: FormValueEncoder
    var codingPath: [any CodingKey] { encoder.codingPath }
    var count: Int { encoder.box.items.count }

    private func add() -> NodeBox {
        let child = NodeBox()
        encoder.box.items.append(child)
        return child
    }

    private func append(_ text: String) {
        let child = add()
        child.kind = .single
        child.node = .value(text)
    }

    mutating func encodeNil() throws { _ = add() }
    mutating func encode(_ value: Bool) throws { append(encoder.bool(value)) }
    mutating func encode(_ value: String) throws { append(value) }
    mutating func encode(_ value: Double) throws { append(try encoder.number(value)) }
    mutating func encode(_ value: Float) throws { append(try encoder.number(Double(value))) }
    mutating func encode(_ value: Int) throws { append(String(value)) }
    mutating func encode(_ value: Int8) throws { append(String(value)) }
    mutating func encode(_ value: Int16) throws { append(String(value)) }
    mutating func encode(_ value: Int32) throws { append(String(value)) }
    mutating func encode(_ value: Int64) throws { append(String(value)) }
    mutating func encode(_ value: UInt) throws { append(String(value)) }
    mutating func encode(_ value: UInt8) throws { append(String(value)) }
    mutating func encode(_ value: UInt16) throws { append(String(value)) }
    mutating func encode(_ value: UInt32) throws { append(String(value)) }
    mutating func encode(_ value: UInt64) throws { append(String(value)) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        try encoder.child(add(), key: IndexKey(count)).encodeValue(value)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        encoder.child(add(), key: IndexKey(count)).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        encoder.child(add(), key: IndexKey(count)).unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder { encoder.child(add(), key: IndexKey(count)) }
}

private struct SingleContainer: SingleValueEncodingContainer {
    let encoder: FormValueEncoder
    var codingPath: [any CodingKey] { encoder.codingPath }

    private func set(_ text: String) {
        encoder.box.kind = .single
        encoder.box.node = .value(text)
    }

    mutating func encodeNil() throws {
        encoder.box.kind = .single
        encoder.box.node = .absent
    }
    mutating func encode(_ value: Bool) throws { set(encoder.bool(value)) }
    mutating func encode(_ value: String) throws { set(value) }
    mutating func encode(_ value: Double) throws { set(try encoder.number(value)) }
    mutating func encode(_ value: Float) throws { set(try encoder.number(Double(value))) }
    mutating func encode(_ value: Int) throws { set(String(value)) }
    mutating func encode(_ value: Int8) throws { set(String(value)) }
    mutating func encode(_ value: Int16) throws { set(String(value)) }
    mutating func encode(_ value: Int32) throws { set(String(value)) }
    mutating func encode(_ value: Int64) throws { set(String(value)) }
    mutating func encode(_ value: UInt) throws { set(String(value)) }
    mutating func encode(_ value: UInt8) throws { set(String(value)) }
    mutating func encode(_ value: UInt16) throws { set(String(value)) }
    mutating func encode(_ value: UInt32) throws { set(String(value)) }
    mutating func encode(_ value: UInt64) throws { set(String(value)) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        try encoder.encodeValue(value)
    }
}
