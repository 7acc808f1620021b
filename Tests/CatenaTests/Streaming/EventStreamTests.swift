@testable import Catena
import CatenaTesting
import Foundation
import Testing
import CatenaDemoServer

/// The event-stream and JSON Lines readers: the spec's rules as examples, and the
/// same answer however the bytes are cut into chunks.
@Suite("Server-sent events and JSON Lines")
struct EventStreamTests {
    static let request = try! APIRequest(urlString: "https://example.com/events")

    static func parse(_ chunks: [[UInt8]], maxEventBytes: Int = 1 << 20) throws -> ([ServerSentEvent], String) {
        var parser = ServerSentEventParser(maxLineBytes: maxEventBytes, maxEventBytes: maxEventBytes)
        var events: [ServerSentEvent] = []
        for chunk in chunks { events += try parser.push(chunk, request: request) }
        return (events, parser.lastEventID)
    }

    static func parse(_ text: String) throws -> [ServerSentEvent] {
        try parse([Array(text.utf8)]).0
    }

    @Test("fields, comments, multi-line data, ids that carry over, retry, and blocks without data")
    func spec() throws {
        let events = try Self.parse(
            """
            : a comment\n\
            data: first\n\
            data:  second line keeps one space\n\
            id: 1\n\
            \n\
            event: token\n\
            data\n\
            data: x\n\
            retry: 1500\n\
            \n\
            id\n\
            event: nothing\n\
            \n\
            data: after\n\
            \n\
            data: unfinished
            """)
        #expect(
            events == [
                ServerSentEvent(event: "message", data: "first\n second line keeps one space", lastEventID: "1"),
                ServerSentEvent(event: "token", data: "\nx", lastEventID: "1", retry: .milliseconds(1500)),
                ServerSentEvent(event: "message", data: "after", lastEventID: "", retry: .milliseconds(1500)),
            ])
    }

    @Test("CR, LF and CRLF line ends, a BOM at the start only, an id with NUL ignored, retry digits only")
    func lineEndsAndOddities() throws {
        let events = try Self.parse("\u{FEFF}data: a\r\rdata: b\r\n\r\nid: x\u{0}y\ndata: \u{FEFF}c\nretry: +5\nretry: 12a\n\n")
        #expect(events.map(\.data) == ["a", "b", "\u{FEFF}c"])
        #expect(events.map(\.lastEventID) == ["", "", ""])
        #expect(events.allSatisfy { $0.retry == nil })
    }

    @Test("an id over 4 KiB is ignored, so Last-Event-ID never carries more")
    func longIDIgnored() throws {
        let long = String(repeating: "x", count: ServerSentEventParser.maxEventIDBytes + 1)
        let fits = String(repeating: "y", count: ServerSentEventParser.maxEventIDBytes)
        let events = try Self.parse("id: 7\ndata: a\n\nid: \(long)\ndata: b\n\nid: \(fits)\ndata: c\n\n")
        #expect(events.map(\.lastEventID) == ["7", "7", fits])
    }

    @Test("the same events whatever the chunk boundaries: every single split and 500 random ones")
    func chunkSplits() throws {
        let text = "\u{FEFF}event: a\r\ndata: 1\r\n\r\n: c\rid: 7\rdata: 2\r\rdata: 3\n\n"
        let bytes = Array(text.utf8)
        let (whole, wholeID) = try Self.parse([bytes])
        #expect(whole.count == 3)
        for cut in 0...bytes.count {
            let (split, id) = try Self.parse([Array(bytes[..<cut]), Array(bytes[cut...])])
            #expect(split == whole, "cut at \(cut)")
            #expect(id == wholeID)
        }
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
        for _ in 0..<500 {
            var chunks: [[UInt8]] = []
            var start = 0
            while start < bytes.count {
                let end = min(bytes.count, start + Int.random(in: 0...5, using: &generator))
                chunks.append(Array(bytes[start..<end]))
                start = end
            }
            #expect(try Self.parse(chunks).0 == whole, "seed \(seed)")
        }
    }

    @Test("random bytes never trap, and a line or event over the bound fails instead of growing")
    func hostileBytes() throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
        let pieces: [[UInt8]] = [
            Array("data:".utf8), Array("id:".utf8), Array("retry:".utf8), [0x0D], [0x0A], [0x00], [0xEF, 0xBB, 0xBF], [0x3A], [0x20], [0xFF],
        ]
        for _ in 0..<2_000 {
            var bytes: [UInt8] = []
            for _ in 0..<Int.random(in: 0...40, using: &generator) {
                bytes += Bool.random(using: &generator) ? pieces.randomElement(using: &generator)! : [UInt8.random(in: 0...255, using: &generator)]
            }
            do {
                _ = try Self.parse([bytes], maxEventBytes: 64)
            } catch {
                #expect((error as? CatenaError)?.code == .invalidResponse, "seed \(seed): \(error)")
            }
        }
        let long = Array(repeating: UInt8(ascii: "a"), count: 100)
        #expect(throws: CatenaError.self) { try Self.parse([Array("data: ".utf8) + long], maxEventBytes: 64) }
        let many = Array(repeating: Array("data: aaaa\n".utf8), count: 20).flatMap { $0 }
        let error = #expect(throws: CatenaError.self) { try Self.parse([many], maxEventBytes: 64) }
        #expect(error?.code == .invalidResponse)
    }

    struct Row: Decodable, Sendable, Equatable { let n: Int }

    static func records(_ chunks: [[UInt8]], format: RecordSplitter.Format) throws -> [(Int, String)] {
        var splitter = RecordSplitter(format: format, maxRecordBytes: 1024)
        var out: [(Int, String)] = []
        for chunk in chunks { out += try splitter.push(chunk, request: request).map { ($0.number, String(decoding: $0.bytes, as: UTF8.self)) } }
        if let last = splitter.finish() { out.append((last.number, String(decoding: last.bytes, as: UTF8.self))) }
        return out
    }

    @Test("JSON Lines and RFC 7464 sequences split into the same records whatever the chunks")
    func recordSplits() throws {
        let lines = Array("{\"n\":1}\r\n\n{\"n\":2}\n  \n{\"n\":3}".utf8)
        let sequence = Array("\u{1E}{\"n\":1}\n\u{1E}{\"n\":2}\n\u{1E}{\"n\":3}\n".utf8)
        for (bytes, format) in [(lines, RecordSplitter.Format.lines), (sequence, .textSequence)] {
            let whole = try Self.records([bytes], format: format)
            #expect(whole.map(\.1) == ["{\"n\":1}", "{\"n\":2}", "{\"n\":3}"])
            // JSON Lines number records by line (blank lines count); sequences by place.
            #expect(whole.map(\.0) == (format == .lines ? [1, 3, 5] : [1, 2, 3]))
            for cut in 0...bytes.count {
                let split = try Self.records([Array(bytes[..<cut]), Array(bytes[cut...])], format: format)
                #expect(split.map(\.1) == whole.map(\.1), "cut at \(cut)")
            }
        }
    }

    @Test("a value that does not decode fails with an error that names its line")
    func decodingErrorNamesTheLine() async throws {
        let body = ResponseBody(Data("{\"n\":1}\n{\"n\":2}\n{\"n\":\"three\"}\n".utf8))
        let response = StreamedResponse(status: .ok, body: body, request: Self.request)
        var seen: [Row] = []
        let error = await #expect(throws: CatenaError.self) {
            for try await row in response.jsonLines(of: Row.self) { seen.append(row) }
        }
        #expect(seen == [Row(n: 1), Row(n: 2)])
        #expect(error?.code == .decodingFailed)
        #expect(error?.detail?.contains("record 3") == true)

        // Blank lines count: the error names the line a person would look at.
        let spaced = StreamedResponse(status: .ok, body: ResponseBody(Data("{\"n\":1}\n\n\nbad\n".utf8)), request: Self.request)
        let lineError = await #expect(throws: CatenaError.self) { for try await _ in spaced.jsonLines(of: Row.self) {} }
        #expect(lineError?.detail?.contains("record 4") == true, "\(String(describing: lineError?.detail))")
    }

    @Test("an event cut off mid-way does not move the last event ID (a reconnection asks again from the one before)")
    func lastEventIDCommitsAtBlankLines() throws {
        var parser = ServerSentEventParser()
        _ = try parser.push(Array("id: 1\ndata: a\n\nid: 2\ndata: b".utf8), request: Self.request)
        #expect(parser.lastEventID == "1")
        _ = try parser.push(Array("\n\n".utf8), request: Self.request)
        #expect(parser.lastEventID == "2")
    }

    @Test("events before an oversized one are still delivered, then the error")
    func eventsBeforeTheError() async throws {
        let big = String(repeating: "x", count: 200)
        let body = ResponseBody(Data("data: a\n\ndata: b\n\ndata: \(big)\n\n".utf8))
        let response = StreamedResponse(status: .ok, body: body, request: Self.request)
        var seen: [String] = []
        let error = await #expect(throws: CatenaError.self) {
            for try await event in response.serverSentEvents(maxEventBytes: 64) { seen.append(event.data) }
        }
        #expect(seen == ["a", "b"])
        #expect(error?.code == .invalidResponse)
    }

    @Test("events through the async sequence, and the last event ID for a reconnection")
    func eventSequence() async throws {
        let body = ResponseBody(Data("id: 41\ndata: a\n\nid: 42\ndata: b\n\n".utf8))
        let response = StreamedResponse(status: .ok, body: body, request: Self.request)
        var iterator = response.serverSentEvents().makeAsyncIterator()
        var data: [String] = []
        while let event = try await iterator.next() { data.append(event.data) }
        #expect(data == ["a", "b"])
        #expect(iterator.lastEventID == "42")
    }
}
