import Catena
@testable import CatenaTesting
import Foundation
import HTTPTypes
import Testing
@testable import CatenaTestSupport

/// HAR files as users commit them: private to their owner, appended without losing a
/// browser's fields or another process's entries, refused when too large to read.
@Suite("HAR files")
struct HARFileTests {
    static func directory() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catena-harfile-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    static func entry(_ url: String) -> HAR.Entry {
        HAR.Entry(
            startedDateTime: "2026-11-27T00:00:00.000Z", time: 1,
            request: HAR.Request(
                method: "GET", url: url, httpVersion: "HTTP/1.1", cookies: [], headers: [], queryString: [], postData: nil, headersSize: -1, bodySize: 0),
            response: HAR.Response(
                status: 200, statusText: "OK", httpVersion: "HTTP/1.1", cookies: [], headers: [],
                content: HAR.Content(size: 2, mimeType: "text/plain", text: "ok", encoding: nil, comment: nil), redirectURL: "", headersSize: -1, bodySize: 2),
            cache: HAR.Cache(), timings: HAR.Timings(blocked: -1, dns: -1, connect: -1, ssl: -1, send: 0, wait: 1, receive: 0), _error: nil)
    }

    static func mode(_ url: URL) throws -> Int {
        try #require(FileManager.default.attributesOfItem(atPath: url.path)[.posixPermissions] as? Int)
    }

    @Test("written and appended with mode 0600, also over a file that was readable by others")
    func ownerOnly() throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let written = directory.appendingPathComponent("w.har"), appended = directory.appendingPathComponent("a.har")
        try HAR(entries: [Self.entry("https://a.test/1")]).write(to: written)
        #expect(try Self.mode(written) == 0o600)
        try HAR.append([Self.entry("https://a.test/2")], toFileAt: appended)
        #expect(try Self.mode(appended) == 0o600)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: appended.path)
        try HAR.append([Self.entry("https://a.test/3")], toFileAt: appended)
        #expect(try Self.mode(appended) == 0o600)
        #expect(try HAR(contentsOf: appended).log.entries.map(\.request.url) == ["https://a.test/2", "https://a.test/3"])
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".tmp") }
        #expect(leftovers.isEmpty, "\(leftovers)")
    }

    @Test("a browser's HAR keeps every field it had: pages, pageref, _initiator, postData.params, cache, extras")
    func browserFieldsKept() throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("chrome.har")
        let browser = """
            {"log": {"version": "1.2", "creator": {"name": "WebInspector", "version": "537.36"},
              "browser": {"name": "Firefox", "version": "133.0"},
              "pages": [{"startedDateTime": "2026-01-01T00:00:00.000Z", "id": "page_1", "title": "https://a.test/",
                         "pageTimings": {"onContentLoad": 120.5, "onLoad": 300}}],
              "entries": [{"_initiator": {"type": "script", "stack": {"callFrames": []}}, "_priority": "High", "_resourceType": "fetch",
                "pageref": "page_1", "startedDateTime": "2026-01-01T00:00:01.000Z", "time": 12.5, "serverIPAddress": "10.0.0.1",
                "connection": "443", "_fromCache": null, "_securityState": true,
                "request": {"method": "POST", "url": "https://a.test/login", "httpVersion": "h2", "cookies": [], "headers": [],
                  "queryString": [], "headersSize": -1, "bodySize": 9,
                  "postData": {"mimeType": "application/x-www-form-urlencoded", "text": "user=ann", "params": [{"name": "user", "value": "ann"}]}},
                "response": {"status": 200, "statusText": "", "httpVersion": "h2", "cookies": [], "headers": [], "redirectURL": "",
                  "headersSize": -1, "bodySize": 2, "_transferSize": 300, "_error": null,
                  "content": {"size": 2, "mimeType": "text/plain", "text": "ok", "compression": 0}},
                "cache": {"beforeRequest": {"lastAccess": "2026-01-01T00:00:00.000Z", "eTag": "x", "hitCount": 1}},
                "timings": {"blocked": 1.5, "dns": -1, "ssl": -1, "connect": -1, "send": 0.1, "wait": 10, "receive": 0.9, "_blocked_queueing": 1.2}}]}}
            """
        try Data(browser.utf8).write(to: file)
        try HAR.append([Self.entry("https://a.test/new")], toFileAt: file)
        let before = try #require(try JSONSerialization.jsonObject(with: Data(browser.utf8)) as? NSDictionary)
        let after = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as? NSDictionary)
        let beforeLog = try #require(before["log"] as? NSDictionary), afterLog = try #require(after["log"] as? NSDictionary)
        for key in ["version", "creator", "browser", "pages"] {
            #expect((afterLog[key] as? NSObject) == (beforeLog[key] as? NSObject), "\(key)")
        }
        let beforeEntries = try #require(beforeLog["entries"] as? [NSDictionary]), afterEntries = try #require(afterLog["entries"] as? [NSDictionary])
        #expect(afterEntries.count == 2)
        #expect(afterEntries.first == beforeEntries.first, "the browser's entry, every field as it was")
        #expect((afterEntries.last?["request"] as? NSDictionary)?["url"] as? String == "https://a.test/new")
        #expect(try HAR(contentsOf: file).log.entries.count == 2, "still a HAR Catena reads")
    }

    @Test("a file over the size limit is refused with its size before it is read")
    func sizeLimit() throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("big.har")
        try HAR(entries: (0..<20).map { Self.entry("https://a.test/\($0)") }).write(to: file)
        let size = try #require(FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int)
        #expect(throws: HARError.self) { try HAR(contentsOf: file, maximumBytes: size - 1) }
        do {
            try HAR.append([Self.entry("https://a.test/x")], toFileAt: file, maximumBytes: 100)
            Issue.record("appended to a file over the limit")
        } catch {
            #expect(error.description.contains("has \(size) bytes, more than the 100"), "\(error)")
        }
        #expect(try HAR(contentsOf: file).log.entries.count == 20, "left as it was")
    }

    @Test("appends racing on one file lose no entry")
    func concurrentAppends() async throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("shared.har")
        await withTaskGroup(of: Void.self) { group in
            for writer in 0..<8 {
                group.addTask {
                    for index in 0..<5 {
                        // Each on a thread of its own: flock between open files, as between processes.
                        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                            Thread.detachNewThread {
                                try? HAR.append([Self.entry("https://a.test/\(writer)/\(index)")], toFileAt: file)
                                done.resume()
                            }
                        }
                    }
                }
            }
        }
        let urls = try HAR(contentsOf: file).log.entries.map(\.request.url)
        #expect(urls.count == 40)
        #expect(Set(urls).count == 40)
    }

    @Test("replay reads \"encoding\": \"base64\" in any letter case")
    func base64AnyCase() async throws {
        for spelling in ["base64", "BASE64", "Base64"] {
            var entry = Self.entry("https://a.test/bin")
            entry.response.content = HAR.Content(size: 3, mimeType: "application/octet-stream", text: "AAEC", encoding: spelling, comment: nil)
            let replay = HARReplayTransport(HAR(entries: [entry]))
            #expect(try await replay.load(try APIRequest(.get, urlString: "https://a.test/bin")).body == Data([0, 1, 2]), "\(spelling)")
        }
    }

    @Test("a binary body is left out of the HAR with a note unless the recorder was told to keep it", arguments: TransportKind.allCases)
    func binaryLeftOut(kind: TransportKind) async throws {
        let environment = try await TestServer.environment()
        let strict = HARRecorder(), keeping = HARRecorder(recordsUnreadableBodies: true)
        // Past 127 the pattern is not UTF-8.
        let request = try APIRequest(.get, path: ["api", "bytes", "300"])
        let body = try await (EnvironmentMiddleware(environment) --> strict --> kind.make()).load(request).body
        _ = try await (EnvironmentMiddleware(environment) --> keeping --> kind.make()).load(request)
        let left = try #require(strict.har.log.entries.first).response.content
        #expect(left.text == nil && left.comment?.hasPrefix("not recorded: 300 bytes that are not UTF-8 text") == true, "\(left)")
        let kept = try #require(keeping.har.log.entries.first).response.content
        #expect(kept.encoding == "base64" && kept.text.flatMap { Data(base64Encoded: $0) }?.count == 300, "\(kept)")
        #expect(body.count == 300)
    }
}
