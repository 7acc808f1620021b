import Catena
@testable import CatenaTesting
import Foundation
import HTTPTypes
import Testing
@testable import CatenaTestSupport
import CatenaDemoServer

/// Recordings that keep the bytes that crossed the wire, and replay of the HAR files
/// browsers export (issue: record a real API once, replay it in tests).
@Suite("HAR: faithful bodies and browser files")
struct HARFidelityTests {
    static let pretty = "{\n  \"uuid\" : \"2f1c1a3e-8a4e-4a56-9a4e-0d1c2b3a4f5e\",\n  \"n\" : 1.50\n}\n"

    @Test("a body with nothing to redact is recorded as received and replayed byte for byte", arguments: TransportKind.allCases)
    func asReceived(kind: TransportKind) async throws {
        let recorder = HARRecorder()
        let chain = EnvironmentMiddleware(try await TestServer.environment()) --> recorder --> kind.make()
        let live = try await chain.load(try APIRequest(.get, path: ["api", "users", "2"]))
        let mock = MockTransport()
        mock.respond(headerFields: [.contentType: "application/json"], body: Data(Self.pretty.utf8))
        let mocked = try await (recorder --> mock).load(try APIRequest(.get, urlString: "https://api.test/uuid"))
        let entries = recorder.har.log.entries
        #expect(entries.count == 2)
        #expect(Data(try #require(entries[0].response.content.text).utf8) == live.body, "\(kind): the server's bytes")
        #expect(entries[1].response.content.text == Self.pretty, "53 bytes stay 53, not re-serialised")
        #expect(entries[1].response.content.comment == nil)
        let replay = HARReplayTransport(recorder.har)
        #expect(try await replay.load(try APIRequest(.get, urlString: "https://api.test/uuid")).body == mocked.body)
    }

    @Test("a body with a secret is redacted in place: every other byte kept, and the entry says so")
    func redactedInPlace() async throws {
        let mock = MockTransport()
        let body = "{ \"user\": \"ann\",\n\t\"password\" : \"hunter2\", \"nested\": {\"pass\\u0077ord\": [1, 2], \"x\": 1.0e3},\n \"api_key\":null }"
        mock.respond(headerFields: [.contentType: "application/json; charset=utf-8"], body: Data(body.utf8))
        let recorder = HARRecorder()
        let sent = "{\"login\":\"ann\",  \"password\":\"s3cr3t-pw\"}"
        _ = try await (recorder --> mock).load(
            try APIRequest(.post, urlString: "https://api.test/login", body: .data(Data(sent.utf8), contentType: "application/json")))
        let entry = try #require(recorder.har.log.entries.first)
        #expect(
            entry.response.content.text
                == "{ \"user\": \"ann\",\n\t\"password\" : \"<redacted>\", \"nested\": {\"pass\\u0077ord\": [0, 0], \"x\": 1.0e3},\n \"api_key\":null }",
            "a secret's shape stays: numbers 0, strings <redacted>, null null"
        )
        #expect(entry.response.content.comment?.hasPrefix("redacted") == true)
        #expect(entry.request.postData?.text == "{\"login\":\"ann\",  \"password\":\"<redacted>\"}")
        #expect(entry.request.postData?.comment?.hasPrefix("redacted") == true)
    }

    @Test("a secret the server echoes in escaped form (\\u0026, \\u003c, \\/) is redacted too")
    func escapedEcho() async throws {
        let mock = MockTransport()
        // As Go's encoding/json, Python's ensure_ascii and PHP write the echoed values.
        let body = #"{"data": "p\u0026ssw0rd!", "name": "s3cret\u003ctag\u003e", "url": "a\/b\/tok3n-x", "plain": "ok\n"}"#
        mock.respond(headerFields: [.contentType: "application/json"], body: Data(body.utf8))
        let recorder = HARRecorder()
        var request = try APIRequest(.post, urlString: "https://api.test/echo", body: .form([(name: "password", value: "p&ssw0rd!")]))
        request.headerFields[.authorization] = "Bearer s3cret<tag>"
        request.headerFields[HTTPField.Name("X-Api-Key")!] = "a/b/tok3n-x"
        _ = try await (recorder --> mock).load(request)
        let text = try #require(recorder.har.log.entries.first?.response.content.text)
        #expect(text == #"{"data": "<redacted>", "name": "<redacted>", "url": "<redacted>", "plain": "ok\n"}"#)
    }

    @Test("secret spans: random JSON, any layout, redacts exactly the secret members; broken text never traps")
    func spansProperty() throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
        let names = ["a", "password", "Token", "x y", "refresh_token", "é", "access_token", "list"]
        func random(_ depth: Int) -> Any {
            switch Int.random(in: 0..<(depth > 3 ? 4 : 6), using: &generator) {
            case 0: return Int.random(in: -1000...1000, using: &generator)
            case 1: return ["s", "\"q\"", "back\\slash", "ü\n", ""].randomElement(using: &generator)!
            case 2: return Bool.random(using: &generator)
            case 3: return NSNull()
            case 4: return (0..<Int.random(in: 0...3, using: &generator)).map { _ in random(depth + 1) }
            default:
                var object: [String: Any] = [:]
                for _ in 0..<Int.random(in: 0...4, using: &generator) { object[names.randomElement(using: &generator)!] = random(depth + 1) }
                return object
            }
        }
        let isSecret = { (name: String) in Redaction.default.isSecretQueryItem(name) }
        // A string or number inside a secret member: what is replaced.
        func containsSecret(_ value: Any, inSecret: Bool = false) -> Bool {
            if let object = value as? [String: Any] { return object.contains { containsSecret($0.value, inSecret: inSecret || isSecret($0.key)) } }
            if let array = value as? [Any] { return array.contains { containsSecret($0, inSecret: inSecret) } }
            return inSecret && (value is String || value is Int)
        }
        // A secret member keeps its shape: its strings and numbers are replaced, nothing else.
        func redacted(_ value: Any, inSecret: Bool = false) -> Any {
            if let object = value as? [String: Any] {
                return object.reduce(into: [String: Any]()) { $0[$1.key] = redacted($1.value, inSecret: inSecret || isSecret($1.key)) }
            }
            if let array = value as? [Any] { return array.map { redacted($0, inSecret: inSecret) } }
            guard inSecret else { return value }
            if value is String { return "<redacted>" }
            if value is Int { return 0 }
            return value
        }
        for round in 0..<300 {
            let value: [String: Any] = ["root": random(0)]
            let options: JSONSerialization.WritingOptions = round.isMultiple(of: 2) ? [.prettyPrinted] : []
            let bytes = Array(try JSONSerialization.data(withJSONObject: value, options: options))
            let spans = try #require(JSONSecretSpans.find(in: bytes, isSecret: isSecret), "seed \(seed)")
            let out = JSONSecretSpans.replacing(spans, in: bytes, with: Array("\"<redacted>\"".utf8))
            let expected = try JSONSerialization.data(withJSONObject: redacted(value), options: [.sortedKeys])
            let got = try JSONSerialization.data(withJSONObject: try JSONSerialization.jsonObject(with: Data(out)), options: [.sortedKeys])
            #expect(got == expected, "seed \(seed), round \(round)")
            #expect(spans.isEmpty == !containsSecret(value), "spans exactly when a secret member holds a string or number; seed \(seed)")
            // Every truncation, with a flipped byte: refused (nil) or read, never a trap;
            // a document cut short is never read as whole.
            let end = (bytes.lastIndex { ![0x20, 0x0A, 0x0D, 0x09].contains($0) } ?? 0) + 1
            for cut in stride(from: 0, to: end, by: max(1, end / 16)) {
                var broken = Array(bytes[..<cut])
                #expect(JSONSecretSpans.find(in: broken, isSecret: isSecret) == nil, "cut at \(cut); seed \(seed)")
                if !broken.isEmpty { broken[Int.random(in: 0..<broken.count, using: &generator)] ^= UInt8.random(in: 1...255, using: &generator) }
                _ = JSONSecretSpans.find(in: broken, isSecret: isSecret)
            }
        }
        let deep = Array((String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)).utf8)
        #expect(JSONSecretSpans.find(in: deep, isSecret: isSecret) == nil, "past 64 levels: not read")
    }

    /// A HAR as Chrome's developer tools save it: pages, initiators, fields of its own,
    /// HTTP/2 pseudo-headers, a compressed response recorded decoded, sizes of -1.
    static let chrome = #"""
        {"log": {"version": "1.2", "creator": {"name": "WebInspector", "version": "537.36"},
          "pages": [{"startedDateTime": "2026-11-25T10:00:00.000Z", "id": "page_1", "title": "a", "pageTimings": {}},
                    {"startedDateTime": "2026-11-25T10:01:00.000Z", "id": "page_2", "title": "b", "pageTimings": {}}],
          "entries": [
            {"_initiator": {"type": "script"}, "_priority": "High", "_resourceType": "fetch", "cache": {}, "pageref": "page_1",
             "request": {"method": "GET", "url": "https://api.example.com/v1/items?page=1&api_key=live-k3y",
               "httpVersion": "http/2.0", "headers": [{"name": ":authority", "value": "api.example.com"}, {"name": "accept", "value": "*/*"}],
               "queryString": [{"name": "page", "value": "1"}], "cookies": [], "headersSize": -1, "bodySize": 0},
             "response": {"status": 200, "statusText": "", "httpVersion": "http/2.0",
               "headers": [{"name": ":status", "value": "200"}, {"name": "content-type", "value": "application/json"},
                           {"name": "content-encoding", "value": "gzip"}, {"name": "content-length", "value": "31"}],
               "cookies": [], "content": {"size": -1, "mimeType": "application/json", "compression": 12, "text": "{\"items\": [1, 2],  \"page\": 1}"},
               "redirectURL": "", "headersSize": -1, "bodySize": -1, "_transferSize": 180, "_error": null},
             "serverIPAddress": "203.0.113.9", "startedDateTime": "2026-11-25T10:00:00.100Z", "time": 42.5,
             "timings": {"blocked": 1.2, "dns": -1, "ssl": -1, "connect": -1, "send": 0.1, "wait": 40, "receive": 1.2, "_blocked_queueing": 0.8}},
            {"pageref": "page_2",
             "request": {"method": "GET", "url": "https://api.example.com/v1/items?page=1&api_key=live-k3y", "httpVersion": "http/2.0",
               "headers": [], "queryString": [], "cookies": [], "headersSize": -1, "bodySize": 0},
             "response": {"status": 200, "statusText": "", "httpVersion": "http/2.0", "headers": [], "cookies": [],
               "content": {"size": 12, "mimeType": "application/json", "text": "{\"items\":[]}"}, "redirectURL": "", "headersSize": -1, "bodySize": -1},
             "startedDateTime": "2026-11-25T10:01:00.100Z", "time": 10, "timings": {"send": 0, "wait": 9, "receive": 1}}
          ]}}
        """#

    /// A HAR as Firefox's developer tools save it: a base64 body, a POST with params,
    /// no cache object, timings without ssl.
    static let firefox = #"""
        {"log": {"version": "1.2", "creator": {"name": "Firefox", "version": "133.0"}, "browser": {"name": "Firefox", "version": "133.0"},
          "pages": [{"startedDateTime": "2026-11-25T10:00:00.000+00:00", "id": "page_1", "title": "x", "pageTimings": {"onLoad": -1}}],
          "entries": [
            {"pageref": "page_1", "startedDateTime": "2026-11-25T10:00:00.000+00:00",
             "request": {"bodySize": 9, "method": "POST", "url": "https://api.example.com/v1/login", "httpVersion": "HTTP/1.1",
               "headers": [{"name": "Content-Type", "value": "application/x-www-form-urlencoded"}], "cookies": [], "queryString": [],
               "headersSize": 200, "postData": {"mimeType": "application/x-www-form-urlencoded", "params": [{"name": "u", "value": "ann"}], "text": "u=ann&p=1"}},
             "response": {"status": 201, "statusText": "Created", "httpVersion": "HTTP/1.1",
               "headers": [{"name": "Content-Type", "value": "application/octet-stream"}, {"name": "X-Trace", "value": "abc"}], "cookies": [],
               "content": {"mimeType": "application/octet-stream", "size": 4, "encoding": "base64", "text": "AAH/fw=="},
               "redirectURL": "", "headersSize": 120, "bodySize": 4},
             "timings": {"blocked": 0, "dns": 0, "connect": 0, "send": 0, "wait": 5, "receive": 0}, "time": 5, "_securityState": "secure", "serverIPAddress": "203.0.113.9", "connection": "443"}
          ]}}
        """#

    @Test("a HAR saved by Chrome or Firefox replays: in recorded order then the last again, base64 bodies, decoded bodies without their coding")
    func browserFiles() async throws {
        let chrome = HARReplayTransport(try JSONDecoder().decode(HAR.self, from: Data(Self.chrome.utf8)))
        // The browser kept the key as sent; the request matches with any value of it.
        let url = "https://api.example.com/v1/items?page=1&api_key=another"
        let first = try await chrome.load(try APIRequest(.get, urlString: url))
        #expect(first.status == .ok && String(decoding: first.body, as: UTF8.self) == #"{"items": [1, 2],  "page": 1}"#)
        #expect(first.headerFields[.contentEncoding] == nil && first.headerFields[.contentLength] == nil, "the recorded body is the decoded one")
        #expect(first.headerFields[.contentType] == "application/json")
        #expect(try await chrome.load(try APIRequest(.get, urlString: url)).body == Data(#"{"items":[]}"#.utf8))
        #expect(try await chrome.load(try APIRequest(.get, urlString: url)).body == Data(#"{"items":[]}"#.utf8), "used up: the last again")
        let missing = await #expect(throws: CatenaError.self) { try await chrome.load(try APIRequest(.get, urlString: "https://api.example.com/v1/other")) }
        #expect(missing?.code == .invalidRequest)
        #expect(missing?.detail?.contains("GET https://api.example.com/v1/other") == true)
        let post = await #expect(throws: CatenaError.self) { try await chrome.load(try APIRequest(.post, urlString: url)) }
        #expect(post?.code == .invalidRequest, "the method is part of the match")

        // Values as sent come first: `code` is a secret name, yet FR gets FR's answer.
        let countries =
            #"{"log": {"entries": ["#
            + ["US", "FR"].map {
                #"{"request": {"method": "GET", "url": "https://a.test/c?code=\#($0)"}, "response": {"status": 200, "content": {"text": "\#($0)"}}}"#
            }
            .joined(separator: ",") + "]}}"
        let byCode = HARReplayTransport(try JSONDecoder().decode(HAR.self, from: Data(countries.utf8)))
        #expect(try await byCode.load(try APIRequest(.get, urlString: "https://a.test/c?code=FR")).body == Data("FR".utf8))
        #expect(try await byCode.load(try APIRequest(.get, urlString: "https://a.test/c?code=US")).body == Data("US".utf8))
        #expect(try await byCode.load(try APIRequest(.get, urlString: "https://a.test/c?code=DE")).body == Data("US".utf8), "else redacted, in order")

        let firefox = HARReplayTransport(try JSONDecoder().decode(HAR.self, from: Data(Self.firefox.utf8)))
        let created = try await firefox.load(try APIRequest(.post, urlString: "https://api.example.com/v1/login", body: .text("u=ann&p=1")))
        #expect(created.status == .created && created.body == Data([0, 1, 255, 127]))
        #expect(created.headerFields[HTTPField.Name("X-Trace")!] == "abc")
    }

    @Test("a browser file with fields missing still loads; one without a method or status is refused, naming the file")
    func lenientButNotBlind() throws {
        let minimal = #"{"log": {"entries": [{"request": {"method": "GET", "url": "https://a.test/"}, "response": {"status": 204}}]}}"#
        let har = try JSONDecoder().decode(HAR.self, from: Data(minimal.utf8))
        #expect(har.log.entries.first?.response.content.size == -1 && har.log.entries.first?.timings.wait == -1)
        let file = FileManager.default.temporaryDirectory.appending(path: "catena-\(UUID().uuidString).har")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data(#"{"log": {"entries": [{"request": {"url": "https://a.test/"}, "response": {"status": 200}}]}}"#.utf8).write(to: file)
        let error = #expect(throws: HARError.self) { try HAR(contentsOf: file) }
        #expect(error?.description.contains(file.lastPathComponent) == true && error?.description.contains("method") == true)
    }
}
