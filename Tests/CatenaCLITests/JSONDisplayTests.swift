import CatenaTesting
import Foundation
import Testing

@testable import CatenaCLI
import CatenaDemoServer

@Suite("catena's JSON layout for the terminal")
struct JSONDisplayTests {
    /// A random JSON value: nested objects and arrays, strings with escapes and
    /// non-ASCII text, numbers in several spellings, literals.
    private func value(_ generator: inout SplitMix64, depth: Int) -> String {
        let kind = depth > 5 ? Int(generator.next() % 4) : Int(generator.next() % 6)
        switch kind {
        case 0: return ["true", "false", "null"][Int(generator.next() % 3)]
        case 1: return ["0", "-1", "1.50", "2e10", "-0.0", "12345678901234567890", "1E-7"][Int(generator.next() % 7)]
        case 2, 3:
            let pieces = ["a", "é", "\\\"", "\\\\", "\\n", "\\u0026", ":", ",", "{", "]", " ", "日本", "\\/"]
            return "\"" + (0..<Int(generator.next() % 6)).map { _ in pieces[Int(generator.next() % UInt64(pieces.count))] }.joined() + "\""
        case 4:
            let members = (0..<Int(generator.next() % 4)).map { index in
                "\"k\(index)\(["", ":", ",", "\\\""][Int(generator.next() % 4)])\"" + space(&generator) + ":" + space(&generator)
                    + value(&generator, depth: depth + 1)
            }
            return "{" + space(&generator) + members.joined(separator: "," + space(&generator)) + space(&generator) + "}"
        default:
            let elements = (0..<Int(generator.next() % 4)).map { _ in value(&generator, depth: depth + 1) }
            return "[" + space(&generator) + elements.joined(separator: space(&generator) + ",") + space(&generator) + "]"
        }
    }

    private func space(_ generator: inout SplitMix64) -> String {
        ["", "", " ", "\n  ", "\t", "\r\n"][Int(generator.next() % 6)]
    }

    /// The text with whitespace outside strings taken out: the tokens, in order.
    private func tokens(_ text: String) -> [UInt8] {
        var out: [UInt8] = []
        var inString = false, escaped = false
        for byte in text.utf8 {
            if inString {
                out.append(byte)
                if escaped { escaped = false } else if byte == UInt8(ascii: "\\") { escaped = true } else if byte == UInt8(ascii: "\"") { inString = false }
            } else if ![0x20, 0x09, 0x0A, 0x0D].contains(byte) {
                out.append(byte)
                if byte == UInt8(ascii: "\"") { inString = true }
            }
        }
        return out
    }

    @Test("every token kept as written, only the whitespace between them changed; the layout reads as the same JSON")
    func keepsTokens() throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
        for _ in 0..<500 {
            let text = value(&generator, depth: 0)
            let formatted = try #require(JSONDisplay.format(Data(text.utf8), colours: false), "seed \(seed): \(text)")
            #expect(tokens(formatted) == tokens(text), "seed \(seed): \(text)")
            let before = try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed]) as? NSObject
            let after = try JSONSerialization.jsonObject(with: Data(formatted.utf8), options: [.fragmentsAllowed]) as? NSObject
            #expect(before == after, "seed \(seed): \(text)")
            let coloured = try #require(JSONDisplay.format(Data(text.utf8), colours: true))
            let plain = withoutEscapeCodes(coloured)
            #expect(plain == formatted, "colours add escape codes only; seed \(seed)")
        }
    }

    /// `text` without its ESC [ … m sequences.
    private func withoutEscapeCodes(_ text: String) -> String {
        var out = "", rest = Substring(text)
        while let escape = rest.firstIndex(of: "\u{1B}") {
            out += rest[..<escape]
            rest = rest[escape...].drop { $0 != "m" }.dropFirst()
        }
        return out + rest
    }

    @Test("text that is not JSON is left alone (nil), whatever a server sends: cuts, flipped bytes, noise, deep nesting")
    func hostileText() throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
        for _ in 0..<300 {
            var bytes = Array(value(&generator, depth: 0).utf8)
            switch generator.next() % 3 {
            case 0: bytes = Array(bytes.prefix(Int(generator.next() % UInt64(bytes.count + 1))))
            case 1: if !bytes.isEmpty { bytes[Int(generator.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: generator.next()) }
            default: bytes = (0..<Int(generator.next() % 64)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            }
            let data = Data(bytes)
            // Foundation takes some text with a NUL in it as JSON (`8\0\\` reads as 8, seed
            // 15402251163475111805), and text behind a byte-order mark; the layout refuses
            // both, so such text is not JSON here.
            let valid =
                !bytes.contains(0) && !bytes.starts(with: [0xEF, 0xBB, 0xBF])
                && (try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])) != nil
            let formatted = JSONDisplay.format(data, colours: true)
            #expect((formatted != nil) == valid, "seed \(seed): \(bytes)")
        }
        // Foundation reads these as JSON; the layout leaves them as sent.
        let bom = Data([0xEF, 0xBB, 0xBF] + Array(#"{"a":[1,{"b":2}]}"#.utf8))
        #expect(JSONDisplay.format(bom, colours: true) == nil)
        let utf16 = #"{"a":[1,{"b":2}]}"#.data(using: .utf16)!
        #expect(JSONDisplay.format(utf16, colours: true) == nil)
        let nul = Data([56, 0, 92])
        #expect((try? JSONSerialization.jsonObject(with: nul, options: [.fragmentsAllowed])) != nil)
        #expect(JSONDisplay.format(nul, colours: true) == nil)
        let deep = Data((String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)).utf8)
        _ = JSONDisplay.format(deep, colours: true)  // Foundation refuses it or the layout is iterative: no stack to run out of
        let wide = Data(("[" + Array(repeating: "1", count: 50_000).joined(separator: ",") + "]").utf8)
        #expect(JSONDisplay.format(wide, colours: false)?.split(separator: "\n").count == 50_002)
    }
}
