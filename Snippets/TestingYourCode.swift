// Testing code that calls an API: the mock transport, and HAR record and replay.
// Runs against the embedded demo server: `swift run --enable-all-traits TestingYourCode`.

// snippet.hide
import CatenaDemoServer

let server = try await DemoServer.start()
let environment = ServerEnvironment(scheme: "http", host: "127.0.0.1", port: server.port)
// snippet.show
import Catena
import CatenaAsyncHTTPClient
import CatenaTesting
import Foundation

// snippet.mock
let mock = MockTransport()
mock.on(.get, "/api/users/*", json: #"{"data": {"id": 2, "email": "janet.weaver@reqres.in"}}"#)  // every time
mock.respond(status: .serviceUnavailable, json: #"{"error": "down"}"#)  // queued: the next unmatched request
mock.respond(status: .noContent)  // and the one after

let chain = RetryMiddleware() --> mock  // the chain under test, with the mock as its transport
let user = try await chain.load(try APIRequest(urlString: "https://api.example.com/api/users/2"))
let deleted = try await chain.load(try APIRequest(.delete, urlString: "https://api.example.com/api/users/2"))
print(user.status, deleted.status, mock.requests.count)  // 200 OK, 204 No Content (after a retry), 3
// snippet.end

// snippet.record
// Real exchanges, recorded right above the transport; secrets come out `<redacted>`.
let recorder = HARRecorder()
let recording = EnvironmentMiddleware(environment) --> recorder --> AsyncHTTPClientTransport()
_ = try await recording.load(try APIRequest(.get, path: ["api", "users", "2"]))
let file = FileManager.default.temporaryDirectory.appendingPathComponent("users.har")
try recorder.har.write(to: file)  // opens in a browser's developer tools
// snippet.end

// snippet.replay
let replay = EnvironmentMiddleware(environment) --> (try HARReplayTransport(contentsOf: file))
let replayed = try await replay.load(try APIRequest(.get, path: ["api", "users", "2"]))
print(replayed.status)  // 200 OK, from the file; a request it has no answer for fails, naming it
// snippet.end

// snippet.fixture
// In a test: a fixture recorded once from the real API with
//   catena get https://api.example.com/api/users/2 --bearer "$TOKEN" --har Tests/Fixtures/users.har
// (the token comes out <redacted>), replayed offline through the chain the app uses.
func fetchUser(_ id: Int, replaying fixture: URL) async throws -> APIResponse {
    let chain = EnvironmentMiddleware(environment) --> RetryMiddleware() --> (try HARReplayTransport(contentsOf: fixture))
    return try await chain.load(try APIRequest(.get, path: ["api", "users", String(id)])).validateStatus()
}
let fixtureUser = try await fetchUser(2, replaying: file)
print(fixtureUser.status, fixtureUser.body.count)  // 200 OK, and the recorded body byte for byte
// snippet.end

// snippet.hide
try? FileManager.default.removeItem(at: file)
await server.stop()
