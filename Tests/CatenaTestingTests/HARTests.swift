import Catena
import CatenaTesting
import Foundation
import HTTPTypes
import Testing
@testable import CatenaTestSupport
import CatenaDemoServer

/// Recording real exchanges with the demo server to a HAR file, and replaying them.
@Suite("HAR recording and replay")
struct HARTests {
    struct Signup: Encodable { let name: String; let password: String }
    static let secrets = ["s3cret-query", "k3y-header", "t0ken-bearer", "hunter2-json", "hunter2-form"]

    /// The exchanges the tests record: secrets in the query, headers, a JSON body the
    /// server echoes, a form body; a 404; a refused connection.
    static func record(through chain: some HTTPLoader, closedPort: Int) async throws {
        var get = try APIRequest(.get, path: ["api", "users", "2"], query: [URLQueryItem(name: "api_key", value: "s3cret-query")])
        get.headerFields[HTTPField.Name("X-Api-Key")!] = "k3y-header"
        get.headerFields[.authorization] = "Bearer t0ken-bearer"
        #expect(try await chain.load(get).status == .ok)
        #expect(
            try await chain.load(try APIRequest(.post, path: ["api", "users"], body: .json(Signup(name: "neo", password: "hunter2-json")))).status == .created)
        #expect(
            try await chain.load(
                try APIRequest(.post, path: ["api", "echo"], body: .form([(name: "username", value: "eve"), (name: "password", value: "hunter2-form")]))
            ).status == .ok)
        #expect(try await chain.load(try APIRequest(.get, path: ["api", "users", "99"])).status == .notFound)
        // A redirect whose Location carries a token (the demo server redirects to the
        // target it is given, so the token is in this request's URL too: only the
        // response's side is checked).
        var redirect = try APIRequest(.get, path: ["api", "redirect"], query: [URLQueryItem(name: "to", value: "/api/echo?token=l0cation-secret")])
        redirect[option: RedirectPolicy.self] = .never
        #expect(try await chain.load(redirect).status == .found)
        let refused = APIRequest(.get, url: URL(string: "http://127.0.0.1:\(closedPort)/gone")!)
        await #expect(throws: CatenaError.self) { try await chain.load(refused) }
    }

    @Test("a session recorded to a HAR 1.2 file: every required field, no secret, and a replay answers as the server did", arguments: TransportKind.allCases)
    func recordAndReplay(kind: TransportKind) async throws {
        let environment = try await TestServer.environment()
        let closedPort = try await TestServer.closedPort()
        let recorder = HARRecorder()
        try await Self.record(through: EnvironmentMiddleware(environment) --> recorder --> kind.make(), closedPort: closedPort)

        let file = FileManager.default.temporaryDirectory.appending(path: "catena-\(UUID().uuidString).har")
        defer { try? FileManager.default.removeItem(at: file) }
        try recorder.har.write(to: file)
        let text = try String(contentsOf: file, encoding: .utf8)
        for secret in Self.secrets { #expect(!text.contains(secret), "\(secret) reached the HAR file") }

        // HAR 1.2's required fields, read as a viewer would: plain JSON.
        let root = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        let log = try #require(root["log"] as? [String: Any])
        #expect(log["version"] as? String == "1.2")
        #expect((log["creator"] as? [String: Any])?["name"] as? String == "Catena")
        let entries = try #require(log["entries"] as? [[String: Any]])
        #expect(entries.count == 6)
        for entry in entries {
            #expect(Set(entry.keys).isSuperset(of: ["startedDateTime", "time", "request", "response", "cache", "timings"]))
            let request = try #require(entry["request"] as? [String: Any])
            #expect(Set(request.keys).isSuperset(of: ["method", "url", "httpVersion", "cookies", "headers", "queryString", "headersSize", "bodySize"]))
            let response = try #require(entry["response"] as? [String: Any])
            #expect(
                Set(response.keys).isSuperset(of: [
                    "status", "statusText", "httpVersion", "cookies", "headers", "content", "redirectURL", "headersSize", "bodySize",
                ]))
            let timings = try #require(entry["timings"] as? [String: Any])
            #expect(Set(timings.keys).isSuperset(of: ["send", "wait", "receive"]))
            #expect(
                ISO8601DateFormatter().date(
                    from: (entry["startedDateTime"] as? String ?? "").replacingOccurrences(of: #"\.\d+"#, with: "", options: .regularExpression)) != nil)
        }
        let har = recorder.har
        #expect(har.log.entries[0].request.url.hasSuffix("/api/users/2?api_key=<redacted>"))
        #expect(har.log.entries[0].timings.wait >= 0)
        #expect(har.log.entries[2].request.postData?.text == "username=eve&password=<redacted>")
        #expect(har.log.entries[4].response.redirectURL == "/api/echo?token=<redacted>")
        #expect(har.log.entries[4].response.headers.first { $0.name.lowercased() == "location" }?.value == "/api/echo?token=<redacted>")
        #expect(har.log.entries[5]._error == CatenaError.Code.cannotConnect.rawValue)

        // The replay answers the same requests from the file, with the server's bodies.
        let replay = try HARReplayTransport(contentsOf: file)
        let replayed = EnvironmentMiddleware(environment) --> replay
        var get = try APIRequest(.get, path: ["api", "users", "2"], query: [URLQueryItem(name: "api_key", value: "another")])
        let first = try await replayed.load(get)
        #expect(first.status == .ok)
        #expect(first.body == Data(try #require(har.log.entries[0].response.content.text).utf8))
        get.headerFields[.authorization] = "Bearer different"
        #expect(try await replayed.load(get).body == first.body, "used up: the last answer again")
        #expect(try await replayed.load(try APIRequest(.get, path: ["api", "users", "99"])).status == .notFound)
        let refused = await #expect(throws: CatenaError.self) {
            try await replayed.load(APIRequest(.get, url: URL(string: "http://127.0.0.1:\(closedPort)/gone")!))
        }
        #expect(refused?.code == .cannotConnect)
        let missing = await #expect(throws: CatenaError.self) { try await replayed.load(try APIRequest(.get, path: ["api", "users", "3"])) }
        #expect(missing?.code == .invalidRequest)
        #expect(missing.map { "\($0)" }?.contains("no answer for GET") == true)
        #expect(replay.receivedRequests.count == 5)
    }

    @Test("AsyncHTTPClient's exchanges carry their connection: the address, one connection kept alive, its set-up as HAR's connect")
    func connectionTimings() async throws {
        let server = try await DemoServer.start()
        defer { Task { await server.stop() } }
        let recorder = HARRecorder()
        let chain = recorder --> TransportKind.asyncHTTPClient.make()
        for _ in 0..<2 { _ = try await chain.load(APIRequest(.get, url: server.baseURL.appending(path: "api/echo"))) }
        let entries = recorder.har.log.entries
        try #require(entries.count == 2)
        let (first, second) = (entries[0], entries[1])
        #expect(first.serverIPAddress == "127.0.0.1" && second.serverIPAddress == "127.0.0.1")
        #expect(first.connection != nil && first.connection == second.connection, "one connection, kept alive")
        #expect(first.response.httpVersion == "HTTP/1.1" && first.request.httpVersion == "HTTP/1.1")
        #expect(first.timings.connect >= 0 && second.timings.connect == -1, "a new server's first call opens the connection")
        #expect(first.timings.dns == -1 && first.timings.ssl == -1, "inside connect: AsyncHTTPClient does not tell them apart")
        for entry in entries {
            let phases = max(0, entry.timings.connect) + entry.timings.send + entry.timings.wait + entry.timings.receive
            #expect(abs(phases - entry.time) < 0.01, "HAR's phases add up to the entry's time: \(entry.timings) vs \(entry.time)")
        }
        // Written and read back, the fields survive.
        let decoded = try JSONDecoder().decode(HAR.self, from: try JSONEncoder().encode(recorder.har))
        #expect(decoded.log.entries.map(\.serverIPAddress) == entries.map(\.serverIPAddress))
        #expect(decoded.log.entries.map(\.connection) == entries.map(\.connection))
    }

    @Test("bounded: past maximumEntries exchanges are counted, not kept; a body over the limit is left out")
    func bounded() async throws {
        let recorder = HARRecorder(maximumEntries: 2, maximumBodyBytes: 10)
        let chain = EnvironmentMiddleware(try await TestServer.environment()) --> recorder --> TransportKind.asyncHTTPClient.make()
        for _ in 0..<3 { _ = try await chain.load(try APIRequest(.get, path: ["api", "users", "2"])) }
        #expect(recorder.har.log.entries.count == 2)
        #expect(recorder.droppedEntries == 1)
        let content = try #require(recorder.har.log.entries.first?.response.content)
        #expect(content.text == nil)
        #expect(content.size > 10)
        #expect(content.comment?.contains("limit") == true)
        recorder.removeAll()
        #expect(recorder.har.log.entries.isEmpty)
    }

    @Test("hostile bodies never trap the recorder and never carry the request's secret into the record")
    func hostileBodies() async throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
        let mock = MockTransport()
        let recorder = HARRecorder()
        let chain = recorder --> mock
        let pieces = ["{", "}", "[", "]", "\"", ":", ",", "password", "token", "=", "&", "tok3n-secret", "\\u0000", "1e999", "null"]
        let types = ["application/json", "application/x-www-form-urlencoded", "text/plain", "application/octet-stream"]
        for round in 0..<500 {
            var body = (0..<Int.random(in: 0...40, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
            var type = types.randomElement(using: &generator)!
            if round == 0 {
                body = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
                type = "application/json"
            }
            mock.respond(headerFields: [.contentType: type], body: Data(body.utf8))
            var request = APIRequest(.get, url: URL(string: "https://api.test/x?token=tok3n-secret")!)
            request.headerFields[.authorization] = "Bearer tok3n-secret"
            _ = try await chain.load(request)
        }
        let text = String(decoding: try recorder.har.encoded(), as: UTF8.self)
        #expect(!text.contains("tok3n-secret"), "seed \(seed)")
        #expect(recorder.har.log.entries.count == 500)
        #expect(recorder.har.log.entries[0].response.content.text?.count == nil, "100,000 levels deep: not walked, not recorded")
    }

    @Test("a file that is no HAR fails clearly")
    func badFile() throws {
        let file = FileManager.default.temporaryDirectory.appending(path: "catena-\(UUID().uuidString).har")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data(#"{"log": {"entries": 3}}"#.utf8).write(to: file)
        let error = #expect(throws: HARError.self) { try HARReplayTransport(contentsOf: file) }
        #expect(error?.description.contains("is not a HAR 1.2 file") == true)
    }
}
