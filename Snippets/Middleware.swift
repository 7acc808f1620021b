// A full chain, a middleware of your own, and the loaders' per-request options.
// Runs against the embedded demo server: `swift run --enable-all-traits Middleware`.

// snippet.hide
import CatenaDemoServer
import Foundation
import HTTPTypes
import Logging

let server = try await DemoServer.start()
let logger = Logger(label: "api")
let oauth = OAuth2Client(
    clientID: "catena-service", authentication: .clientSecretBasic("catena-service-secret"),
    endpoints: .init(token: server.baseURL.appendingPathComponent("oauth/token")), loader: AsyncHTTPClientTransport())
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
    --> TokenAuthMiddleware(hosts: ["127.0.0.1:\(server.port)"], allowHTTP: true, client: oauth, signIn: .clientCredentials())
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

// snippet.health
let budget = RetryBudget()  // retries and hedges: at most 10 % of successes, plus 1 a second
let healthy =
    EnvironmentMiddleware(ServerEnvironment(scheme: "http", host: "127.0.0.1", port: server.port))
    --> HedgeMiddleware(budget: budget)  // a second GET when the first is slower than the origin's p95
    --> RetryMiddleware(budget: budget)
    --> CircuitBreakerMiddleware()  // 5 failures in a row: fail at once for 5 s, then one probe
    --> RateLimitMiddleware(declared: ["legacy.example": .init(10, per: .seconds(1))])
    --> ValidationMiddleware()
    --> AsyncHTTPClientTransport()
// snippet.end

// snippet.quota
// 1 call, then 100 at once, against a route that allows 50 a second: no 429, about 2 s.
let limited = try APIRequest(.get, path: ["api", "limited"], query: [.init(name: "quota", value: "50")])
_ = try await healthy.load(limited)
try await withThrowingTaskGroup(of: Void.self) { group in
    for _ in 0..<100 { group.addTask { _ = try await healthy.load(limited) } }
    try await group.waitForAll()
}
// snippet.end

// snippet.problem
do {
    _ = try await healthy.load(try APIRequest(.get, path: ["api", "problem"]))
} catch {
    if let problem = error.problem {  // RFC 9457: application/problem+json
        print(problem.displayTitle ?? "", problem.extensions["balance"] ?? .null)  // You do not have enough credit. number(30.0)
    }
    switch error.code {
    case .rateLimited, .circuitOpen: print("not sent:", error.detail ?? "")  // says when to try again
    case .retryBudgetExhausted: print("gave up without retrying:", error.underlyingError ?? error)
    default: print(error)
    }
}
// snippet.end

// snippet.hide
_ = try await routed.load(try APIRequest(.get, path: ["api", "users", "2"]))
_ = tagged
await chain.reset()
await server.stop()
