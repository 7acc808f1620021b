import Catena
import CatenaDemoServer
import CatenaTesting
import Foundation
import HTTPTypes
import Testing
@testable import CatenaTestSupport

/// The health middleware as the Middleware article builds them (ValidationMiddleware
/// below the limiter, so a 429 or 503 arrives as an error carrying the response), against
/// the demo server and nginx; answers charged to the origin that gave them.
@Suite("The documented health chain, against the demo server and nginx")
struct HealthChainTests {
    /// The Middleware article's chain, in its order, below an event log.
    static func documentedChain(_ environment: ServerEnvironment, kind: TransportKind, log: EventLog) -> any HTTPLoader {
        let budget = RetryBudget()
        return log.observer
            --> EnvironmentMiddleware(environment)
            --> HedgeMiddleware(budget: budget)
            --> RetryMiddleware(budget: budget)
            --> CircuitBreakerMiddleware()
            --> RateLimitMiddleware(declared: ["legacy.example": .init(10, per: .seconds(1))])
            --> ValidationMiddleware()
            --> kind.make()
    }

    /// A first call answered with `Retry-After: 2`, then four other calls: none may reach
    /// the origin until the hold ends, and they do after it. `arrivals` gives when each
    /// request of the first call (hedges and retries too) and of the others reached the
    /// server (seconds since 1970, the server's clock): the others are told apart on the
    /// server, so neither a hedge of the first call landing late nor a late wake-up of this
    /// test on a loaded run can blur what came when.
    static func holdsAfterRetryAfter(
        _ request: APIRequest, then other: APIRequest, kind: TransportKind, environment: ServerEnvironment,
        arrivals: @escaping @Sendable () async throws -> (first: [Double], others: [Double])
    ) async throws {
        let log = EventLog()
        let chain = documentedChain(environment, kind: kind, log: log)
        let first = Task { try? await chain.load(request) }
        defer { first.cancel() }
        let isHold = { (event: CallEvent) in if case .rateLimitHold = event { true } else { false } }
        #expect(await Timing.eventually(within: .seconds(10)) { log.firstTime(of: isHold) != nil })
        let others = (0..<4).map { _ in Task { try? await chain.load(other) } }
        defer { others.forEach { $0.cancel() } }
        // After the hold, the others go.
        #expect(try await Timing.eventually(within: .seconds(10)) { try await !arrivals().others.isEmpty })
        // The hold ends 2 s after the answer reached the client, which was after the first
        // request reached the server: no other call may arrive before that arrival + 2 s
        // (1.8 s, for the granularity of the server's clock).
        let (firsts, otherArrivals) = try await arrivals()
        let firstArrival = try #require(firsts.min())
        let early = otherArrivals.filter { $0 < firstArrival + 1.8 }
        #expect(early.isEmpty, "calls reached the origin inside its Retry-After: \(early.map { $0 - firstArrival }) s after the first")
    }

    /// The two hold tests judge arrival times to a few tenths of a second, which an
    /// instrumented run on two cores does not keep (a hedge sent to learn landed late
    /// under ThreadSanitizer); the limiter's state runs under it in LimiterStateTests.
    static let timed = !Timing.isThreadSanitized

    @Test(
        "the demo server's 503 with Retry-After: 2 holds every call until then", .enabled(if: timed, "timed to tenths of a second"),
        arguments: TransportKind.allCases)
    func demoServerHold(kind: TransportKind) async throws {
        let environment = try await TestServer.environment()
        let (key, otherKey) = (uniqueKey(), uniqueKey())
        let outage = { (key: String) in
            try APIRequest(
                .get, path: ["api", "outage"],
                query: [.init(name: "key", value: key), .init(name: "fail", value: "60"), .init(name: "retry-after", value: "2")])
        }
        let stats = EnvironmentMiddleware(environment) --> TransportKind.asyncHTTPClient.make()
        let arrivals = { @Sendable (key: String) in
            try await stats.load(try APIRequest(.get, path: ["api", "outage", "stats"], query: [.init(name: "key", value: key)])).decode(FlakyStats.self)
                .arrivals ?? []
        }
        try await Self.holdsAfterRetryAfter(try outage(key), then: try outage(otherKey), kind: kind, environment: environment) {
            (try await arrivals(key), try await arrivals(otherKey))
        }
    }

    @Test(
        "nginx's 429 with Retry-After: 2 holds every call until then", .enabled(if: NginxProcess.testsRun, "apt-get install nginx-light (.ci/run does)"),
        .enabled(if: timed, "timed to tenths of a second"),
        arguments: TransportKind.allCases)
    func nginxHold(kind: TransportKind) async throws {
        let nginx = try await NginxProcess.start(
            locations: """
                        location /limited { add_header Retry-After 2 always; return 429; }
                """)
        defer { nginx.stop() }
        let environment = try #require(ServerEnvironment(baseURL: nginx.baseURL))
        try await Self.holdsAfterRetryAfter(
            try APIRequest(.get, path: ["limited"]), then: try APIRequest(.get, path: ["limited"], query: [.init(name: "other", value: "1")]), kind: kind,
            environment: environment
        ) {
            let all = nginx.arrivals
            return (all.filter { !$0.uri.contains("other") }.map(\.time), all.filter { $0.uri.contains("other") }.map(\.time))
        }
    }

    @Test("after a redirect, the origin that answered is held, not the one that redirected", arguments: TransportKind.allCases)
    func chargedToAnsweringOrigin(kind: TransportKind) async throws {
        let environment = try await TestServer.environment()
        let port = try #require(environment.port)
        let limiter = RateLimitMiddleware(maxWait: .milliseconds(200))
        let chain = limiter --> ValidationMiddleware() --> kind.make()
        let key = uniqueKey()
        // 127.0.0.1 redirects to localhost, which answers 503 with Retry-After: 30.
        let redirecting = try APIRequest(
            urlString: "http://127.0.0.1:\(port)/api/redirect-host?host=localhost&to="
                + "%2Fapi%2Foutage%3Fkey%3D\(key)%26fail%3D60%26retry-after%3D30")
        let error = await #expect(throws: CatenaError.self) { try await chain.load(redirecting) }
        #expect(error?.response?.status == .serviceUnavailable)
        #expect(error?.response?.request.host == "localhost")
        // The origin that redirected is free; the one that answered is held.
        #expect(try await chain.load(try APIRequest(urlString: "http://127.0.0.1:\(port)/api/users/2")).status == .ok)
        let held = await #expect(throws: CatenaError.self) { try await chain.load(try APIRequest(urlString: "http://localhost:\(port)/api/users/2")) }
        #expect(held?.code == .rateLimited)
    }

    @Test("a circuit's probe refused on this side (rate-limited, untrusted, unauthenticated) leaves it half-open for the next probe")
    func probeRefusedLocally() async throws {
        let clock = ManualClock()
        let transport = MockTransport()
        transport.on(nil, "down", status: .serviceUnavailable)
        transport.on(nil, "refused") { request throws(CatenaError) in throw CatenaError(.rateLimited, request: request) }
        transport.on(nil, "untrusted") { request throws(CatenaError) in throw CatenaError(.untrustedServer, request: request) }
        transport.on(nil, "up", status: .ok)
        let breaker = CircuitBreakerMiddleware(.init(consecutiveFailures: 1), clock: clock)
        let chain = breaker --> transport
        let origin = try APIRequest(urlString: "https://api.example/")
        _ = try await chain.load(try APIRequest(urlString: "https://api.example/down"))
        #expect(breaker.state(for: origin) == .open)
        clock.advance(.seconds(5))
        for path in ["refused", "untrusted"] {
            await #expect(throws: CatenaError.self) { try await chain.load(try APIRequest(urlString: "https://api.example/\(path)")) }
            #expect(breaker.state(for: origin) == .halfOpen, "\(path) said nothing of the origin's health")
        }
        #expect(try await chain.load(try APIRequest(urlString: "https://api.example/up")).status == .ok)
        #expect(breaker.state(for: origin) == .closed)
    }

    @Test("a hedged POST carries one Idempotency-Key on both attempts")
    func hedgeSharesIdempotencyKey() async throws {
        let transport = MockTransport()
        let attempts = Locked(0)
        transport.on(nil, "**") { request throws(CatenaError) in
            // The first attempt is slow, so the hedge goes.
            if attempts.withLock({
                $0 += 1; return $0
            }) == 1 {
                try? await Task.sleep(for: .milliseconds(500))
            }
            return APIResponse(status: .ok, request: request)
        }
        let chain = HedgeMiddleware(after: .fixed(.milliseconds(20)), methods: [.post]) --> transport
        var request = try APIRequest(.post, urlString: "https://api.example/orders", body: .json(["item": 1]))
        request[option: IdempotencyKey.self] = .generated
        _ = try await chain.load(request)
        let keys = transport.requests.map { $0.headerFields[.idempotencyKey] }
        #expect(keys.count == 2)
        #expect(keys[0] != nil && keys[0] == keys[1], "\(keys)")
    }
}
