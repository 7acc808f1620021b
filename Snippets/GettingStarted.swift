// A chain, a request, a decoded answer, and the errors to expect.
// Runs against the embedded demo server: `swift run --enable-all-traits GettingStarted`.

// snippet.hide
import CatenaDemoServer
import Foundation
import HTTPTypes

let server = try await DemoServer.start()
let apiKey = "demo-key"
// snippet.show
import Catena
import CatenaAsyncHTTPClient
import Logging

// snippet.chain
let environment = ServerEnvironment(
    scheme: "http", host: "127.0.0.1", port: server.port,
    headerFields: [HTTPField.Name("x-api-key")!: apiKey])  // a secret: redacted in logs and errors

let chain =
    EnvironmentMiddleware(environment)
    --> LogMiddleware(logger: Logger(label: "api"))
    --> AsyncHTTPClientTransport()
// snippet.end

// snippet.request
struct User: Decodable {
    let id: Int
    let email: String
}
struct SingleUser: Decodable { let data: User }

// Paths are built from components, each percent-encoded on its own.
let request = try APIRequest(.get, path: ["api", "users", "2"])
let user = try await chain.load(request)
    .validateStatus()  // 2xx, or CatenaError(.unacceptableStatus) carrying the response
    .decode(SingleUser.self)  // or CatenaError(.decodingFailed) naming the type and the key
    .data
print(user.email)
// snippet.end

// snippet.options
enum TraceID: RequestOption { static let defaultValue: String? = nil }

var listing = try APIRequest(.get, path: ["api", "users"])
listing[option: TraceID.self] = "abc-123"  // your own option, read by your middleware
listing.timeout = .seconds(5)  // RequestTimeout
listing[option: MaximumResponseSize.self] = 256 << 20  // the default is 64 MiB
// snippet.end

// snippet.errors
do {
    _ = try await chain.load(try APIRequest(.get, path: ["api", "users", "99"])).validateStatus()
} catch {
    switch error.code {
    case .cancelled, .timedOut:
        print("gave up")
    case .unacceptableStatus:
        print(error.response?.status ?? "")  // 404 Not Found
    default:
        print(error)  // names the request (secrets redacted) and what went wrong
    }
}
// snippet.end

// snippet.hide
_ = try await chain.load(listing)
await server.stop()
