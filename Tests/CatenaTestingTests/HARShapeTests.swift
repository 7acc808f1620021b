import Catena
@testable import CatenaTesting
import Foundation
import HTTPTypes
import Testing
@testable import CatenaTestSupport

/// Recordings that replay as the API answered: a body left out fails its replay rather
/// than replaying as empty, and scrubbing keeps a JSON document's shape.
@Suite("HAR: recordings that replay with the same models")
struct HARShapeTests {
    @Test("a body the recording left out (over the size limit) fails its replay, naming the option that keeps it", arguments: TransportKind.allCases)
    func leftOutBodyFailsReplay(kind: TransportKind) async throws {
        let recorder = HARRecorder(maximumBodyBytes: 16)
        let chain = EnvironmentMiddleware(try await TestServer.environment()) --> recorder --> kind.make()
        let live = try await chain.load(try APIRequest(.get, path: ["api", "users", "2"]))
        #expect(live.status == .ok && live.body.count > 16)
        let content = try #require(recorder.har.log.entries.first?.response.content)
        #expect(content.text == nil && content.size == live.body.count)

        let replay = EnvironmentMiddleware(try await TestServer.environment()) --> HARReplayTransport(recorder.har)
        let error = await #expect(throws: CatenaError.self) { try await replay.load(try APIRequest(.get, path: ["api", "users", "2"])) }
        #expect(error?.code == .invalidResponse)
        #expect(error?.detail?.contains("maximumBodyBytes") == true, "\(String(describing: error))")
        #expect(error?.detail?.contains("\(live.body.count)-byte body") == true)
    }

    struct Session: Codable, Equatable {
        struct Cookies: Codable, Equatable { let sid: String; let age: Int }
        let user: String
        let cookies: Cookies
        let tokens: [String]
        let authorization_endpoint: URL
        let pin: Int
    }

    @Test("a secret member that is an object or array keeps its names and types; a URL-valued one is judged by its own query")
    func scrubbingKeepsShape() async throws {
        let mock = MockTransport()
        let body = #"""
            {"user": "ann", "cookies": {"sid": "s-3cr3t", "age": 60}, "tokens": ["t-1111", "t-2222"],
             "authorization_endpoint": "https://auth.example/authorize", "pin": 123456,
             "callback": "https://app.example/cb?access_token=leaked-1", "reset_token": "https://app.example/reset/9f8e-leaked-2"}
            """#
        mock.respond(headerFields: [.contentType: "application/json"], body: Data(body.utf8))
        let recorder = HARRecorder()
        _ = try await (recorder --> mock).load(try APIRequest(urlString: "https://api.example/session"))
        let text = try #require(recorder.har.log.entries.first?.response.content.text)
        for secret in ["s-3cr3t", "t-1111", "t-2222", "123456", "leaked-1", "leaked-2"] { #expect(!text.contains(secret), "\(text)") }
        let session = try JSONDecoder().decode(Session.self, from: Data(text.utf8))
        #expect(
            session
                == Session(
                    user: "ann", cookies: .init(sid: "<redacted>", age: 0), tokens: ["<redacted>", "<redacted>"],
                    authorization_endpoint: URL(string: "https://auth.example/authorize")!, pin: 0))
        #expect(text.contains(#""callback": "<redacted>""#), "a URL with a secret query is a secret whole")
        #expect(text.contains(#""reset_token": "<redacted>""#), "a secret name that does not name an address keeps its URL hidden")

        // Replayed, it decodes with the same model.
        let replayed = try await HARReplayTransport(recorder.har).load(try APIRequest(urlString: "https://api.example/session"))
        #expect(try replayed.decode(Session.self) == session)
    }
}
