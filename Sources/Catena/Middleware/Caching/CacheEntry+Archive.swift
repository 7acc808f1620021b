import Foundation
import HTTPTypes

/// A cache entry as one file: a magic line, the length of the description that follows
/// and a checksum of everything after the header, then the description (JSON) and the
/// body. A file that is truncated, torn by a crash, altered or another entry's (renamed
/// or copied) does not decode: a miss, never a wrong answer.
extension CacheEntry {
    private static let magic = Array("CATENA-CACHE-1\n".utf8)
    /// Magic, description length (4 bytes), checksum (8 bytes).
    private static var headerLength: Int { magic.count + 12 }
    /// The most a description may take: header fields beyond that are no answer to keep.
    static let maximumDescriptionBytes = 1 << 20

    private struct Description: Codable {
        var key: String
        var status: Int
        var reason: String
        var fields: [[String]]
        var receivedAt: Double
        var initialAge: Double
        var varying: [[String]]
        var bodyLength: Int
    }

    /// The entry as a file's contents, named `key` (the file's name, checked on reading),
    /// the request values its `Vary` names sealed with `secret`.
    func archived(key: String, secret: [UInt8]) -> Data? {
        let sealed = varying.map { [$0.key.rawName, varyingSecret == nil ? Self.sealed($0.value, with: secret) : $0.value] }
        let description = Description(
            key: key, status: status.code, reason: status.reasonPhrase, fields: headerFields.map { [$0.name.rawName, $0.value] },
            receivedAt: receivedAt.timeIntervalSince1970, initialAge: initialAge, varying: sealed.sorted { $0[0] < $1[0] },
            bodyLength: body.count)
        guard let json = try? JSONEncoder().encode(description), json.count <= Self.maximumDescriptionBytes else { return nil }
        var data = Data(capacity: Self.headerLength + json.count + body.count)
        data.append(contentsOf: Self.magic)
        withUnsafeBytes(of: UInt32(json.count).bigEndian) { data.append(contentsOf: $0) }
        var checksum = FNV1a()
        checksum.add(json)
        checksum.add(body)
        withUnsafeBytes(of: checksum.value.bigEndian) { data.append(contentsOf: $0) }
        data.append(json)
        data.append(body)
        return data
    }

    /// The entry `data` holds, if it is whole and named `key`; nil for anything else.
    /// Its `Vary` values stay sealed with `secret`.
    init?(archived data: Data, key: String, secret: [UInt8]) {
        let data = data.startIndex == 0 ? data : Data(data)
        guard data.count >= Self.headerLength, data.starts(with: Self.magic) else { return nil }
        let wide = data[Self.magic.count..<Self.magic.count + 4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        let stored = data[Self.magic.count + 4..<Self.headerLength].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        guard wide <= UInt32(Self.maximumDescriptionBytes), Int(wide) <= data.count - Self.headerLength else { return nil }
        let length = Int(wide)
        var checksum = FNV1a()
        data.withUnsafeBytes { checksum.add($0[Self.headerLength...]) }
        guard checksum.value == stored else { return nil }
        let json = data.subdata(in: Self.headerLength..<Self.headerLength + length)
        let body = data.subdata(in: (Self.headerLength + length)..<data.count)
        guard let description = try? JSONDecoder().decode(Description.self, from: json), description.key == key,
            description.bodyLength == body.count, (100...599).contains(description.status), description.receivedAt.isFinite,
            description.initialAge.isFinite, description.initialAge >= 0
        else { return nil }
        var fields = HTTPFields()
        for pair in description.fields {
            guard pair.count == 2, let name = HTTPField.Name(pair[0]) else { return nil }
            fields.append(HTTPField(name: name, value: pair[1]))
        }
        var varying: [HTTPField.Name: String] = [:]
        for pair in description.varying {
            guard pair.count == 2, let name = HTTPField.Name(pair[0]) else { return nil }
            varying[name] = pair[1]
        }
        self.init(
            status: HTTPResponse.Status(code: description.status, reasonPhrase: description.reason), headerFields: fields, body: body,
            receivedAt: Date(timeIntervalSince1970: description.receivedAt), varying: varying, varyingSecret: secret,
            initialAge: description.initialAge)
    }
}

/// FNV-1a, 64 bits: against torn and truncated files, not against an attacker (who
/// could write the directory, and so any answer, anyway).
struct FNV1a {
    private(set) var value: UInt64 = 0xcbf2_9ce4_8422_2325

    mutating func add(_ bytes: some Sequence<UInt8>) {
        for byte in bytes { value = (value ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
    }
}
