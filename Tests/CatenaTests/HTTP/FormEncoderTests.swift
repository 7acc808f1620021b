@testable import Catena
import CatenaTesting
import Foundation
import Testing
import CatenaDemoServer

@Suite("Encodable as query items and form fields")
struct FormEncoderTests {
    struct Page: Encodable { let number: Int; let size: Int }
    struct Search: Encodable {
        let text: String
        let tags: [String]
        let since: Date?
        let page: Page
        let exact: Bool
        let ratio: Double
    }

    static let search = Search(text: "a & b=c", tags: ["http", "nio"], since: nil, page: Page(number: 2, size: 20), exact: true, ratio: 0.5)

    func pairs(_ value: some Encodable, _ encoder: FormEncoder = FormEncoder()) throws -> [String] {
        try encoder.encode(value).map { "\($0.name)=\($0.value)" }
    }

    @Test("nested keys, arrays, nil left out, booleans and numbers, in the order encode(to:) wrote them")
    func shape() throws {
        #expect(try pairs(Self.search) == ["text=a & b=c", "tags[]=http", "tags[]=nio", "page[number]=2", "page[size]=20", "exact=true", "ratio=0.5"])
        let dotted = FormEncoder(arrays: .indexed, nesting: .dots, bools: .numeric)
        #expect(try pairs(Self.search, dotted) == ["text=a & b=c", "tags.0=http", "tags.1=nio", "page.number=2", "page.size=20", "exact=1", "ratio=0.5"])
        #expect(try pairs(Self.search, FormEncoder(arrays: .repeatedName)).filter { $0.hasPrefix("tags") } == ["tags=http", "tags=nio"])
        #expect(try pairs(Self.search, FormEncoder(arrays: .commaSeparated)).filter { $0.hasPrefix("tags") } == ["tags=http,nio"])
        #expect(try pairs(["list": [["a": 1]]], FormEncoder(arrays: .indexed)) == ["list[0][a]=1"])
    }

    @Test("dates by strategy; Data as base64; URL as its string")
    func values() throws {
        struct Stamp: Encodable { let at: Date; let blob: Data; let link: URL }
        let stamp = Stamp(at: Date(timeIntervalSince1970: 1_700_000_000.25), blob: Data([1, 2, 3]), link: URL(string: "https://x.test/a?b")!)
        #expect(try pairs(stamp) == ["at=2023-11-14T22:13:20.250Z", "blob=AQID", "link=https://x.test/a?b"])
        #expect(try pairs(stamp, FormEncoder(dates: .secondsSince1970)).first == "at=1700000000.25")
        #expect(try pairs(stamp, FormEncoder(dates: .millisecondsSince1970)).first == "at=1700000000250")
        #expect(try pairs(stamp, FormEncoder(dates: .custom { _ in "then" })).first == "at=then")
    }

    @Test("what has no form encoding fails with a clear error instead of a wrong query")
    func refusals() throws {
        #expect(throws: EncodingError.self) { try FormEncoder().encode(["x": Double.nan]) }
        #expect(throws: EncodingError.self) { try FormEncoder().encode(42) }
        #expect(throws: EncodingError.self) { try FormEncoder(arrays: .commaSeparated).encode(["list": [["a": 1]]]) }
        let error = #expect(throws: CatenaError.self) { try APIRequest(.get, path: ["s"], query: ["x": Double.infinity]) }
        #expect(error?.code == .invalidRequest)
        #expect(error?.detail?.contains("does not encode") == true)
    }

    @Test("random names and values survive the strict query encoding: 500 dictionaries round-trip through the URL")
    func roundTrip() throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
        let pieces = ["&", "=", "+", "?", "#", "%", "%20", " ", "[", "]", ".", "é", "💡", "/", ";"]
        for _ in 0..<500 {
            var value: [String: String] = [:]
            for _ in 0..<Int.random(in: 1...5, using: &generator) {
                value[randomHeaderText(&generator, pieces: pieces, maxPieces: 6)] = randomHeaderText(&generator, pieces: pieces, maxPieces: 6)
            }
            let request = try APIRequest(.get, path: ["s"], query: value)
            var components = URLComponents()
            components.percentEncodedQuery = request.percentEncodedQuery
            let decoded = Dictionary((components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 })
            #expect(decoded == value, "seed \(seed)")
        }
    }
}
