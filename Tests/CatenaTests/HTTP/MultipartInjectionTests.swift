@testable import Catena
import CatenaTesting
import Foundation
import Testing
import CatenaDemoServer

/// Caller text that becomes a multipart header line can never add a header or end
/// the part's head early, whatever its bytes.
@Suite("Multipart headers under hostile input")
struct MultipartInjectionTests {
    static let pieces = [
        "\r\n", "\r", "\n", "\"", "X-Injected: 1", "a", "é", "\u{0}", "\u{7F}", "\u{85}", "\u{2028}", ";",
        "\t", " ", "--", "filename=", "%0D",
    ]

    /// The header lines of each part of `data` (between the boundary line and the blank line).
    static func headLines(_ data: Data, boundary: String) -> [[String]] {
        let text = String(decoding: data, as: UTF8.self)
        return text.components(separatedBy: "--\(boundary)\r\n").dropFirst().map { part in
            let head = part.components(separatedBy: "\r\n\r\n").first ?? ""
            return head.components(separatedBy: "\r\n")
        }
    }

    @Test("the issue's example: a content type with CRLF and a header behind it")
    func crlfContentType() throws {
        var form = MultipartForm(boundary: "b")
        form.append(.init(name: "file", filename: "a\r\nX-Injected: 1.txt", contentType: "text/plain\r\nX-Injected: 1", data: Data("x".utf8)))
        let lines = try #require(Self.headLines(form.encoded(), boundary: "b").first)
        #expect(lines.count == 2, "\(lines)")
        #expect(!lines.contains { $0.hasPrefix("X-Injected") })
        #expect(lines[1] == "Content-Type: text/plainX-Injected: 1")
    }

    @Test("3,000 random names, filenames and content types: two header lines per part, never more")
    func random() {
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
        func text() -> String {
            (0..<Int.random(in: 0...6, using: &generator)).map { _ in Self.pieces.randomElement(using: &generator)! }.joined()
        }
        for _ in 0..<3_000 {
            var form = MultipartForm(boundary: "catena-test-boundary")
            form.append(.init(name: text(), filename: text(), contentType: text(), data: Data("x".utf8)))
            let parts = Self.headLines(form.encoded(), boundary: "catena-test-boundary")
            #expect(parts.count == 1, "seed \(seed)")
            guard let lines = parts.first else { continue }
            #expect(lines.count == 2, "seed \(seed): \(lines)")
            #expect(lines.first?.hasPrefix("Content-Disposition: form-data; name=\"") == true, "seed \(seed): \(lines)")
            #expect(lines.last?.hasPrefix("Content-Type: ") == true, "seed \(seed): \(lines)")
            // The quoted parameters hold no bare quote: each value ends where it should.
            #expect(lines.first.map { $0.filter { $0 == "\"" }.count } == 4, "seed \(seed): \(lines)")
        }
    }
}
