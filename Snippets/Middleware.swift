// A full chain, a middleware of your own, and the loaders' per-request options.
// Runs against the embedded demo server: `swift run --enable-all-traits Middleware`.

// snippet.hide
import CatenaDemoServer
import Foundation
import HTTPTypes
import Logging

let server = try await DemoServer.start()
let logger = Logger(label: "api")
let oauth = OAuth2PasswordFlow(
    tokenURL: server.baseURL.appendingPathComponent("oauth/token"), username: "janet.weaver@reqres.in", password: "any",
    loader: AsyncHTTPClientTransport())
struct Job: Encodable { let name: String }
// snippet.show
import Catena
import CatenaAsyncHTTPClient

// snippet.own
/// Stamps every request with the app's version, and notes how long the server took.
struct AppVersion: HTTPMiddleware {
    let version: String

    func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        var request = request
        request.headerFields[.userAgent] = "MyApp/\(version)"
        let response = try await next.load(request)  // call the next loader once
        if let timing = response.headerFields[HTTPField.Name("server-timing")!] {
            logger.debug("server took \(timing)")
        }
        return response
    }
}
// snippet.end

// snippet.chain
let chain =
    ResetGuardMiddleware()  // reset() cancels what is in flight, then resets every loader below
    --> EnvironmentMiddleware(ServerEnvironment(scheme: "http", host: "127.0.0.1", port: server.port))
    --> AppVersion(version: "2.1")
    --> LogMiddleware(logger: logger)
    --> DeduplicationMiddleware()  // identical GETs that opt in share one call
    --> ThrottleMiddleware(maxInFlight: 6)
    --> RetryMiddleware()
    --> ValidationMiddleware(Acceptance(contentTypes: ["application/json"]))
    --> TokenAuthMiddleware(hosts: ["127.0.0.1:\(server.port)"], allowHTTP: true, refresh: oauth.refresh)
    --> AsyncHTTPClientTransport()
// snippet.end

// snippet.options
var post = try APIRequest(.post, path: ["api", "users"], body: .json(Job(name: "nightly")))
post[option: RetryStrategy.self] = RetryStrategy(methods: [.post])  // this POST is idempotent
post[option: Acceptance.self] = Acceptance(statuses: [201])
post.timeout = .seconds(10)
_ = try await chain.load(post)
// snippet.end

// snippet.modify
let tagged =
    RequestModifierMiddleware { $0.headerFields[HTTPField.Name("x-request-id")!] = UUID().uuidString }
    --> AsyncHTTPClientTransport()
// snippet.end

// snippet.composite
let intranet = BasicAuthMiddleware(hosts: ["intranet"], allowHTTP: true, credentials: BasicCredentials(user: "me", password: "secret"))
let routed = Composite(
    [.init(name: "intranet", loader: intranet --> AsyncHTTPClientTransport()) { $0.host == "intranet" }],
    fallback: chain)
// snippet.end

// snippet.hide
_ = try await routed.load(try APIRequest(.get, path: ["api", "users", "2"]))
_ = tagged
await chain.reset()
await server.stop()
