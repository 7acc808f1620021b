import Catena
import CatenaAsyncHTTPClient
import CatenaTesting
import Foundation
import HTTPTypes
import Synchronization
import Testing

/// Records every wait instead of sleeping.
final class VirtualClock: RetryClock {
    private let sleeps = Locked<[Duration]>([])
    /// The real time: only Retry-After dates read it, and they were made by the server
    /// from the real time (a frozen start would add the test's own duration to the wait).
    func now() -> Date { Date() }
    func sleep(for duration: Duration) async throws {
        try Task.checkCancellation()
        sleeps.withLock { $0.append(duration) }
    }
    var waits: [Duration] { sleeps.withLock { $0 } }
}

/// Counts the requests that pass it.
final class Counter: HTTPMiddleware {
    let count = Atomic<Int>(0)
    func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        count.add(1, ordering: .relaxed)
        return try await next.load(request)
    }
}

/// Counts occurrences by name, from any task.
final class Tally: Sendable {
    private let counts = Locked<[String: Int]>([:])
    func add(_ name: String) { counts.withLock { $0[name, default: 0] += 1 } }
    var all: [String: Int] { counts.withLock { $0 } }
}

/// A unique key per test, so counters on the shared server never collide.
func uniqueKey(_ name: String = #function) -> String { "\(name)-\(UUID().uuidString)" }

struct InFlightStats: Decodable { let current: Int; let peak: Int; let total: Int }

func inFlightStats(_ key: String) async throws -> InFlightStats {
    try await TransportKind.asyncHTTPClient.chain()
        .load(try APIRequest(.get, path: ["api", "inflight", "stats"], query: [URLQueryItem(name: "key", value: key)]))
        .decode(InFlightStats.self)
}

func holdRequest(_ key: String, hold: Double = 0.2) throws -> APIRequest {
    try APIRequest(.get, path: ["api", "inflight"], query: [URLQueryItem(name: "key", value: key), URLQueryItem(name: "hold", value: String(hold))])
}

@Suite("Validate")
struct ValidateTests {
    @Test("unacceptable statuses and content types fail with the response; a request can widen what it accepts")
    func validate() async throws {
        let env = try await TestServer.environment()
        let chain = ApplyEnvironment(env) --> Validate(Acceptance(contentTypes: ["application/json"])) --> AsyncHTTPClientTransport.forTests()

        #expect(try await chain.load(try APIRequest(.get, path: ["api", "users", "1"])).status == .ok)

        let notFound = await #expect(throws: CatenaError.self) { try await chain.load(try APIRequest(.get, path: ["api", "users", "99"])) }
        #expect(notFound?.code == .unacceptableStatus)
        #expect(notFound?.response?.status == .notFound)

        let bytes = await #expect(throws: CatenaError.self) { try await chain.load(try APIRequest(.get, path: ["api", "bytes", "10"])) }
        #expect(bytes?.code == .invalidResponse)
        #expect(bytes?.detail?.contains("\"application/octet-stream\"") == true)

        var lenient = try APIRequest(.get, path: ["api", "users", "99"])
        lenient[option: Acceptance.self] = Acceptance(statuses: [200, 404])
        #expect(try await chain.load(lenient).status == .notFound)

        // 204 has no body, so its (absent) content type is not judged.
        #expect(try await chain.load(try APIRequest(.delete, path: ["api", "users", "1"])).status == .noContent)
    }
}

@Suite("Throttle")
struct ThrottleTests {
    @Test("the server never sees more than the limit in flight; opted-out requests pass")
    func peakEqualsLimit() async throws {
        let key = uniqueKey()
        let chain = ApplyEnvironment(try await TestServer.environment()) --> Throttle(maxInFlight: 3) --> AsyncHTTPClientTransport.forTests()
        try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
            for _ in 0..<12 { group.addTask { try await chain.load(try holdRequest(key)).status } }
            for try await status in group { #expect(status == .ok) }
        }
        let stats = try await inFlightStats(key)
        #expect(stats.peak == 3)
        #expect(stats.total == 12)

        let bypassKey = uniqueKey()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<6 {
                group.addTask {
                    var request = try holdRequest(bypassKey, hold: 0.3)
                    request[option: BypassThrottle.self] = true
                    _ = try await chain.load(request)
                }
            }
            try await group.waitForAll()
        }
        #expect(try await inFlightStats(bypassKey).peak > 3)
    }

    @Test("a queued request that is cancelled leaves at once and never starts")
    func cancelWhileQueued() async throws {
        let key = uniqueKey()
        let throttle = Throttle(maxInFlight: 1)
        let chain = ApplyEnvironment(try await TestServer.environment()) --> throttle --> AsyncHTTPClientTransport.forTests()
        // The slot frees about 4 s after the cancel: leaving within 2 s proves the queue
        // did not wait for it, with room for a loaded machine.
        let first = Task { try await chain.load(try holdRequest(key, hold: Timing.stretch(4))) }
        #expect(await Timing.eventually { (try? await inFlightStats(key).current) == 1 })
        let queued = Task { try await chain.load(try holdRequest(key)) }
        #expect(await Timing.eventually { throttle.waiting == 1 })
        let cancelledAt = ContinuousClock.now
        queued.cancel()
        let error = (await queued.result).failure as? CatenaError
        #expect(error?.code == .cancelled)
        #expect(ContinuousClock.now - cancelledAt < Timing.stretch(.seconds(2)), "left the queue without waiting for the slot")
        #expect(throttle.waiting == 0)
        _ = try await first.value
        #expect(try await inFlightStats(key).total == 1)
    }
}

extension ThrottleTests {
    @Test("reset fails every waiting request with cancelled; the one in flight finishes")
    func resetFailsWaiters() async throws {
        let key = uniqueKey()
        let throttle = Throttle(maxInFlight: 1)
        let chain = ApplyEnvironment(try await TestServer.environment()) --> throttle --> AsyncHTTPClientTransport.forTests()
        let running = Task { try await chain.load(try holdRequest(key, hold: 0.5)) }
        try await Task.sleep(for: .milliseconds(100))
        let waiters = (0..<3).map { _ in Task { try await chain.load(try holdRequest(key)) } }
        try await Task.sleep(for: .milliseconds(100))
        #expect(throttle.waiting == 3)
        await chain.reset()
        for waiter in waiters {
            #expect(((await waiter.result).failure as? CatenaError)?.code == .cancelled)
        }
        #expect(try await running.value.status == .ok)
        #expect(try await inFlightStats(key).total == 1, "no waiter was ever sent")
        #expect(try await chain.load(try holdRequest(key, hold: 0)).status == .ok, "the throttle works again after the reset")
    }
}

@Suite("Retry")
struct RetryTests {
    func flaky(_ key: String, failures: Int, status: Int = 503, method: HTTPRequest.Method = .get, extra: [URLQueryItem] = [], body: APIRequest.Body = .empty) throws -> APIRequest {
        try APIRequest(method, path: ["api", "flaky"], query: [
            URLQueryItem(name: "key", value: key), URLQueryItem(name: "failures", value: String(failures)),
            URLQueryItem(name: "status", value: String(status)),
        ] + extra, body: body)
    }

    struct Call: Decodable { let call: Int }

    func chain(_ strategy: RetryStrategy = RetryStrategy(jitter: false), clock: VirtualClock, counter: Counter = Counter()) async throws -> some HTTPLoader {
        ApplyEnvironment(try await TestServer.environment()) --> Retry(strategy, clock: clock) --> counter --> AsyncHTTPClientTransport.forTests()
    }

    @Test("each retryable status is retried with exponential backoff", arguments: [408, 429, 500, 502, 503, 504])
    func retryableStatuses(status: Int) async throws {
        let clock = VirtualClock()
        let response = try await chain(clock: clock).load(try flaky(uniqueKey(), failures: 2, status: status))
        #expect(response.status == .ok)
        #expect(try response.decode(Call.self).call == 3)
        #expect(response.request[option: RetryAttempt.self] == 3, "the response tells which attempt it came from")
        #expect(clock.waits == [.milliseconds(200), .milliseconds(400)])
    }

    @Test("other statuses and POST are not retried by default")
    func notRetried() async throws {
        let clock = VirtualClock()
        let counter = Counter()
        let chain = try await chain(clock: clock, counter: counter)
        #expect(try await chain.load(try flaky(uniqueKey(), failures: 1, status: 501)).status.code == 501)
        #expect(try await chain.load(try flaky(uniqueKey(), failures: 1, method: .post)).status.code == 503)
        #expect(counter.count.load(ordering: .relaxed) == 2)
        #expect(clock.waits.isEmpty)
    }

    @Test("the last retryable response is returned after the maximum number of attempts")
    func maxAttempts() async throws {
        let clock = VirtualClock()
        let counter = Counter()
        let response = try await chain(RetryStrategy(maxAttempts: 4, jitter: false), clock: clock, counter: counter)
            .load(try flaky(uniqueKey(), failures: 10))
        #expect(response.status.code == 503)
        #expect(counter.count.load(ordering: .relaxed) == 4)
        #expect(clock.waits == [.milliseconds(200), .milliseconds(400), .milliseconds(800)])
    }

    @Test("Retry-After in seconds and as an HTTP date is honoured; beyond the cap there is no retry")
    func retryAfter() async throws {
        let seconds = VirtualClock()
        #expect(try await chain(clock: seconds).load(try flaky(uniqueKey(), failures: 1, status: 429, extra: [URLQueryItem(name: "retry_after", value: "7")])).status == .ok)
        #expect(seconds.waits == [.seconds(7)])

        let date = VirtualClock()
        #expect(try await chain(clock: date).load(try flaky(uniqueKey(), failures: 1, status: 503, extra: [URLQueryItem(name: "retry_after_date", value: "30")])).status == .ok)
        let wait = try #require(date.waits.first)
        // 30 s after the server wrote the date (to the second), less the time the
        // answer took to arrive and be read (seconds under ThreadSanitizer).
        #expect(wait >= .seconds(30) - Timing.stretch(.seconds(2)) && wait <= .seconds(31), "waited \(wait)")

        let tooLong = VirtualClock()
        let counter = Counter()
        let response = try await chain(clock: tooLong, counter: counter).load(try flaky(uniqueKey(), failures: 1, status: 429, extra: [URLQueryItem(name: "retry_after", value: "86400")]))
        #expect(response.status == .tooManyRequests)
        #expect(tooLong.waits.isEmpty)
        #expect(counter.count.load(ordering: .relaxed) == 1)
    }

    @Test("full jitter draws each backoff between zero and its exponential value")
    func jitter() async throws {
        let clock = VirtualClock()
        let uppers = Locked<[Double]>([])
        let chain = ApplyEnvironment(try await TestServer.environment())
            --> Retry(.standard, clock: clock) { upper in uppers.withLock { $0.append(upper) }; return upper / 2 }
            --> AsyncHTTPClientTransport.forTests()
        #expect(try await chain.load(try flaky(uniqueKey(), failures: 2)).status == .ok)
        #expect(uppers.withLock { $0 } == [0.2, 0.4])
        #expect(clock.waits == [.milliseconds(100), .milliseconds(200)])
    }

    @Test("a refused connection is retried, then reported")
    func refusedConnection() async throws {
        let port = try await TestServer.closedPort()
        let clock = VirtualClock()
        let counter = Counter()
        let chain = Retry(RetryStrategy(jitter: false), clock: clock) --> counter --> AsyncHTTPClientTransport.forTests()
        let error = await #expect(throws: CatenaError.self) { try await chain.load(try APIRequest(.get, urlString: "http://127.0.0.1:\(port)/")) }
        #expect(error?.code == .cannotConnect)
        #expect(counter.count.load(ordering: .relaxed) == 3)
        #expect(clock.waits.count == 2)
    }

    @Test("cancelled and reset-in-progress are never retried")
    func neverRetriesCancel() async throws {
        for code in [CatenaError.Code.cancelled, .resetInProgress] {
            let mock = MockTransport()
            mock.fail(code)
            mock.respond(status: .ok)
            let clock = VirtualClock()
            let strategy = RetryStrategy(errorCodes: [.cannotConnect, .cancelled, .resetInProgress])
            let error = await #expect(throws: CatenaError.self) {
                try await (Retry(strategy, clock: clock) --> mock).load(try APIRequest(.get, urlString: "http://example.com/"))
            }
            #expect(error?.code == code)
            #expect(mock.requests.count == 1)
        }
    }

    @Test("each attempt produces the body afresh")
    func bodyProducedPerAttempt() async throws {
        let produced = Atomic<Int>(0)
        let body = APIRequest.Body(kind: "counted", contentType: "text/plain") {
            produced.add(1, ordering: .relaxed)
            return Data("attempt".utf8)
        }
        let clock = VirtualClock()
        let response = try await chain(clock: clock).load(try flaky(uniqueKey(), failures: 2, method: .put, body: body))
        #expect(response.status == .ok)
        #expect(produced.load(ordering: .relaxed) == 3)
    }

    @Test("cancelling while waiting to retry ends the wait at once")
    func cancelDuringBackoff() async throws {
        // The real clock, telling when the backoff has begun: the cancel lands in it.
        final class SignallingClock: RetryClock {
            let waiting = Locked(false)
            func now() -> Date { Date() }
            func sleep(for duration: Duration) async throws {
                waiting.withLock { $0 = true }
                try await Task.sleep(for: duration)
            }
        }
        let clock = SignallingClock()
        let chain = ApplyEnvironment(try await TestServer.environment())
            --> Retry(RetryStrategy(baseDelay: .seconds(30), jitter: false), clock: clock) --> AsyncHTTPClientTransport.forTests()
        let task = Task { try await chain.load(try flaky(uniqueKey(), failures: 1)) }
        #expect(await Timing.eventually { clock.waiting.withLock { $0 } }, "the retry began its backoff")
        let cancelledAt = ContinuousClock.now
        task.cancel()
        #expect(((await task.result).failure as? CatenaError)?.code == .cancelled)
        #expect(ContinuousClock.now - cancelledAt < Timing.stretch(.seconds(3)))
    }
}

@Suite("Authentication")
struct AuthTests {
    struct Me: Decodable { let email: String }

    func oauth() async throws -> OAuth2PasswordFlow {
        let base = try await TestServer.running().baseURL
        return OAuth2PasswordFlow(tokenURL: base.appending(path: "oauth/token"), username: "eve.holt@reqres.in", password: "cityslicka",
                                  loader: AsyncHTTPClientTransport.forTests())
    }

    func expire(_ token: String) async throws {
        let base = try await TestServer.running().baseURL
        _ = try await AsyncHTTPClientTransport.forTests().load(APIRequest(.post, url: base.appending(path: "oauth/expire"), body: .form([(name: "token", value: token)])))
    }

    @Test("basic auth reaches the configured host, and only that host")
    func basicAuth() async throws {
        let server = try await TestServer.running()
        let chain = BasicAuth(hosts: [try await TestServer.authority()], credentials: BasicCredentials(user: "catena", password: "chains")) --> AsyncHTTPClientTransport.forTests()
        #expect(try await chain.load(try APIRequest(.get, baseURL: server.baseURL, path: ["api", "basic-auth"])).status == .ok)

        let wrong = BasicAuth(hosts: [try await TestServer.authority()], credentials: BasicCredentials(user: "catena", password: "nope")) --> AsyncHTTPClientTransport.forTests()
        #expect(try await wrong.load(try APIRequest(.get, baseURL: server.baseURL, path: ["api", "basic-auth"])).status == .unauthorized)

        var perRequest = try APIRequest(.get, baseURL: server.baseURL, path: ["api", "basic-auth"])
        perRequest[option: BasicCredentials.self] = BasicCredentials(user: "catena", password: "chains")
        #expect(try await wrong.load(perRequest).status == .ok)

        let elsewhere = try await chain.load(try APIRequest(.get, urlString: "http://localhost:\(server.port)/api/echo")).decode(Echo.self)
        #expect(elsewhere.header("authorization") == nil)
    }

    @Test("an auth, cache or de-duplication loader placed before the environment says so instead of silently doing nothing")
    func misordered() async throws {
        let mock = MockTransport()
        mock.respond()
        let env = try await TestServer.environment()
        let token = TokenAuth(hosts: [try await TestServer.authority()]) { _ in BearerToken(accessToken: "t") } --> ApplyEnvironment(env) --> mock
        let basic = BasicAuth(hosts: [try await TestServer.authority()], credentials: .init(user: "u", password: "p")) --> ApplyEnvironment(env) --> mock
        let cache = HTTPCache() --> ApplyEnvironment(env) --> mock
        let dedupe = Deduplicate() --> ApplyEnvironment(env) --> mock
        for chain in [token, basic, cache, dedupe] as [any HTTPLoader] {
            let error = await #expect(throws: CatenaError.self) { try await chain.load(try APIRequest(.get, path: ["api", "users"])) }
            #expect(error?.code == .invalidRequest)
            #expect(error?.detail?.contains("put it after ApplyEnvironment") == true)
        }
        #expect(mock.requests.isEmpty)
    }

    @Test("OAuth 2: the first request logs in; an expired token is refreshed with the refresh-token grant")
    func oauthFlow() async throws {
        let env = try await TestServer.environment()
        let auth = TokenAuth(hosts: [try await TestServer.authority()], refresh: try await oauth().refresh)
        let chain = ApplyEnvironment(env) --> auth --> AsyncHTTPClientTransport.forTests()
        let me = try await chain.load(try APIRequest(.get, path: ["api", "protected", "me"])).validateStatus().decode(Me.self)
        #expect(me.email == "eve.holt@reqres.in")
        #expect(auth.refreshCount == 1)
        let first = try #require(auth.currentToken)

        try await expire(first.accessToken)
        #expect(try await chain.load(try APIRequest(.get, path: ["api", "protected", "me"])).status == .ok)
        #expect(auth.refreshCount == 2)
        #expect(auth.currentToken?.accessToken != first.accessToken)
    }

    @Test("a 401 that a Validate loader below turned into an error still triggers one refresh and a resend")
    func refreshWithValidationBelow() async throws {
        let env = try await TestServer.environment()
        let auth = TokenAuth(hosts: [try await TestServer.authority()], refresh: try await oauth().refresh)
        let chain = ApplyEnvironment(env) --> auth --> Validate() --> AsyncHTTPClientTransport.forTests()
        _ = try await chain.load(try APIRequest(.get, path: ["api", "protected", "me"]))
        try await expire(try #require(auth.currentToken).accessToken)
        let me = try await chain.load(try APIRequest(.get, path: ["api", "protected", "me"])).decode(Me.self)
        #expect(me.email == "eve.holt@reqres.in")
        #expect(auth.refreshCount == 2)
    }

    @Test("100 requests that get 401 at once cause exactly one refresh, and all succeed")
    func singleFlightRefresh() async throws {
        let env = try await TestServer.environment()
        let auth = TokenAuth(hosts: [try await TestServer.authority()], refresh: try await oauth().refresh)
        let chain = ApplyEnvironment(env) --> auth --> AsyncHTTPClientTransport.forTests()
        _ = try await chain.load(try APIRequest(.get, path: ["api", "protected", "me"])).validateStatus()
        try await expire(try #require(auth.currentToken).accessToken)

        try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
            for _ in 0..<100 { group.addTask { try await chain.load(try APIRequest(.get, path: ["api", "protected", "me"])).status } }
            var statuses: [HTTPResponse.Status] = []
            for try await status in group { statuses.append(status) }
            #expect(statuses.count == 100)
            #expect(statuses.allSatisfy { $0 == .ok })
        }
        #expect(auth.refreshCount == 2, "one login, then one refresh for all 100")
    }

    @Test("a failed refresh fails every waiting request with that error, and none is sent again")
    func failedRefreshNoReplay() async throws {
        struct RefreshDenied: Error {}
        let env = try await TestServer.environment()
        let refreshes = Atomic<Int>(0)
        let auth = TokenAuth(hosts: [try await TestServer.authority()], token: BearerToken(accessToken: "not-a-live-token")) { _ in
            refreshes.add(1, ordering: .relaxed)
            // Long enough that every one of the 20 401s arrives while it runs, also on a
            // loaded machine (a 401 after a failed refresh rightly tries a new one).
            try await Task.sleep(for: Timing.stretch(.seconds(1)))
            throw RefreshDenied()
        }
        let counter = Counter()
        let chain = ApplyEnvironment(env) --> auth --> counter --> AsyncHTTPClientTransport.forTests()
        let errors = try await withThrowingTaskGroup(of: CatenaError?.self) { group in
            for _ in 0..<20 {
                group.addTask {
                    do { _ = try await chain.load(try APIRequest(.get, path: ["api", "protected", "me"])); return nil } catch { return error as? CatenaError }
                }
            }
            return try await group.reduce(into: [CatenaError?]()) { $0.append($1) }
        }
        #expect(errors.count == 20)
        #expect(errors.allSatisfy { $0?.code == .authenticationFailed && $0?.underlyingError is RefreshDenied })
        #expect(refreshes.load(ordering: .relaxed) == 1)
        #expect(counter.count.load(ordering: .relaxed) == 20, "each request was sent once and never replayed")
    }

    @Test("the token never reaches another host, also after a redirect", arguments: TransportKind.allCases)
    func tokenStaysHome(kind: TransportKind) async throws {
        let server = try await TestServer.running()
        let auth = TokenAuth(hosts: [try await TestServer.authority()], token: BearerToken(accessToken: "t0ken-for-127")) { _ in BearerToken(accessToken: "t0ken-for-127") }
        let chain = auth --> kind.make()

        let home = try await chain.load(try APIRequest(.get, baseURL: server.baseURL, path: ["api", "echo"])).decode(Echo.self)
        #expect(home.header("authorization") == "Bearer t0ken-for-127")

        let direct = try await chain.load(try APIRequest(.get, urlString: "http://localhost:\(server.port)/api/echo")).decode(Echo.self)
        #expect(direct.header("authorization") == nil)

        let redirected = try await chain.load(try APIRequest(.get, baseURL: server.baseURL, path: ["api", "redirect-host"], query: [
            URLQueryItem(name: "host", value: "localhost"), URLQueryItem(name: "to", value: "/api/echo"),
        ]))
        #expect(redirected.status == .ok)
        #expect(try redirected.decode(Echo.self).header("authorization") == nil)
    }
}

/// A middleware whose reset takes a while, to observe requests arriving meanwhile.
final class SlowReset: HTTPMiddleware {
    let resets = Atomic<Int>(0)
    func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        try await next.load(request)
    }
    func reset() async {
        resets.add(1, ordering: .relaxed)
        try? await Task.sleep(for: .milliseconds(300))
    }
}

@Suite("Reset")
struct ResetTests {
    @Test("reset during 100 requests in flight completes them all with cancelled, rejects newcomers, then opens again")
    func resetInFlight() async throws {
        let resetGuard = ResetGuard()
        let slow = SlowReset()
        let chain = resetGuard --> ApplyEnvironment(try await TestServer.environment()) --> slow --> AsyncHTTPClientTransport.forTests()
        let slowRequest = try APIRequest(.get, path: ["api", "users", "1"], query: [URLQueryItem(name: "delay", value: "10")])
        let tasks = (0..<100).map { _ in Task { try await chain.load(slowRequest) } }
        try await Task.sleep(for: .milliseconds(300))
        #expect(resetGuard.inFlight == 100)

        let reset = Task { await chain.reset() }
        try await Task.sleep(for: .milliseconds(100))
        let newcomer = await #expect(throws: CatenaError.self) { try await chain.load(try APIRequest(.get, path: ["api", "users", "1"])) }
        #expect(newcomer?.code == .resetInProgress)

        await reset.value
        var codes: [CatenaError.Code] = []
        for task in tasks { codes.append(((await task.result).failure as? CatenaError)?.code ?? .unknown) }
        #expect(codes.count == 100)
        #expect(codes.allSatisfy { $0 == .cancelled })
        #expect(slow.resets.load(ordering: .relaxed) == 1)
        #expect(resetGuard.inFlight == 0)
        #expect(try await chain.load(try APIRequest(.get, path: ["api", "users", "1"])).status == .ok)
    }

    @Test("reset makes loaders drop their state: the token is fetched again")
    func resetDropsToken() async throws {
        let env = try await TestServer.environment()
        let auth = TokenAuth(hosts: [try await TestServer.authority()]) { _ in BearerToken(accessToken: UUID().uuidString) }
        let chain = ResetGuard() --> ApplyEnvironment(env) --> auth --> AsyncHTTPClientTransport.forTests()
        _ = try await chain.load(try APIRequest(.get, path: ["api", "echo"]))
        #expect(auth.refreshCount == 1)
        await chain.reset()
        #expect(auth.currentToken == nil)
        _ = try await chain.load(try APIRequest(.get, path: ["api", "echo"]))
        #expect(auth.refreshCount == 2)
    }
}

@Suite("Composite")
struct CompositeTests {
    @Test("requests go to the route their option names, else the first match, else the fallback; reset reaches all")
    func routing() async throws {
        let server = try await TestServer.running()
        let basic = MockTransport(), token = MockTransport(), fallback = MockTransport()
        let composite = Composite([
            .init(name: "basic", loader: BasicAuth(hosts: [try await TestServer.authority()], credentials: .init(user: "catena", password: "chains")) --> basic) { $0.percentEncodedPath.hasPrefix("/api/basic") },
            .init(name: "token", loader: TokenAuth(hosts: [try await TestServer.authority()], token: .init(accessToken: "tok")) { _ in .init(accessToken: "tok") } --> token) { $0.percentEncodedPath.hasPrefix("/api/protected") },
        ], fallback: fallback)
        for mock in [basic, token, fallback] { mock.respond(); mock.respond() }

        _ = try await composite.load(try APIRequest(.get, baseURL: server.baseURL, path: ["api", "basic-auth"]))
        _ = try await composite.load(try APIRequest(.get, baseURL: server.baseURL, path: ["api", "protected", "me"]))
        _ = try await composite.load(try APIRequest(.get, baseURL: server.baseURL, path: ["api", "users"]))
        var forced = try APIRequest(.get, baseURL: server.baseURL, path: ["api", "users"])
        forced[option: CompositeRoute.self] = "token"
        _ = try await composite.load(forced)

        #expect(basic.requests.map { $0.headerFields[.authorization]?.hasPrefix("Basic ") } == [true])
        #expect(token.requests.map { $0.headerFields[.authorization] } == ["Bearer tok", "Bearer tok"])
        #expect(fallback.requests.count == 1)

        var unknown = try APIRequest(.get, baseURL: server.baseURL, path: ["api", "users"])
        unknown[option: CompositeRoute.self] = "nope"
        let error = await #expect(throws: CatenaError.self) { try await composite.load(unknown) }
        #expect(error?.detail?.contains("no composite route named \"nope\"") == true)

        await composite.reset()
        #expect([basic, token, fallback].map(\.resetCount) == [1, 1, 1])
    }
}

@Suite("De-duplication")
struct DeduplicateTests {
    func shared(_ key: String) throws -> APIRequest {
        var request = try holdRequest(key, hold: 0.4)
        request[option: DeduplicateRequest.self] = true
        return request
    }

    @Test("10 identical GETs make one transport call; each caller gets its own response")
    func tenBecomeOne() async throws {
        let key = uniqueKey()
        let chain = ApplyEnvironment(try await TestServer.environment()) --> Deduplicate() --> AsyncHTTPClientTransport.forTests()
        try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
            for _ in 0..<10 { group.addTask { try await chain.load(try shared(key)).status } }
            var count = 0
            for try await status in group { #expect(status == .ok); count += 1 }
            #expect(count == 10)
        }
        #expect(try await inFlightStats(key).total == 1)

        let optOut = uniqueKey()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<4 { group.addTask { _ = try await chain.load(try holdRequest(optOut)) } }
            try await group.waitForAll()
        }
        #expect(try await inFlightStats(optOut).total == 4)
    }

    @Test("one caller's cancel leaves the others served; when all cancel, the call is cancelled")
    func cancellation() async throws {
        let key = uniqueKey()
        let dedupe = Deduplicate()
        let chain = ApplyEnvironment(try await TestServer.environment()) --> dedupe --> AsyncHTTPClientTransport.forTests()
        let tasks = (0..<5).map { _ in Task { try await chain.load(try shared(key)) } }
        try await Task.sleep(for: .milliseconds(100))
        tasks[0].cancel()
        #expect(((await tasks[0].result).failure as? CatenaError)?.code == .cancelled)
        for task in tasks.dropFirst() { #expect(try await task.value.status == .ok) }
        #expect(try await inFlightStats(key).total == 1)

        let lonely = Task { try await chain.load(try shared(uniqueKey())) }
        try await Task.sleep(for: .milliseconds(100))
        #expect(dedupe.sharedCalls == 1)
        lonely.cancel()
        #expect(((await lonely.result).failure as? CatenaError)?.code == .cancelled)
        #expect(dedupe.sharedCalls == 0)
    }
}

@Suite("All loaders together")
struct CombinedLoaderTests {
    @Test("every request through the whole suite completes exactly once: success, failure and cancel mixed")
    func everyRequestCompletesOnce() async throws {
        let env = try await TestServer.environment()
        let clock = VirtualClock()
        let auth = TokenAuth(hosts: [try await TestServer.authority()], refresh: try await AuthTests().oauth().refresh)
        let chain = ResetGuard() --> ApplyEnvironment(env) --> Deduplicate() --> Throttle(maxInFlight: 4)
            --> Retry(RetryStrategy(jitter: false), clock: clock) --> Validate() --> auth --> AsyncHTTPClientTransport.forTests()

        let completions = Tally()
        let outcomes = Tally()
        var tasks: [Task<Void, Never>] = []
        for index in 0..<60 {
            var request: APIRequest
            switch index % 5 {
            case 0: request = try APIRequest(.get, path: ["api", "users", String(index % 12 + 1)])
            case 1: request = try APIRequest(.get, path: ["api", "flaky"], query: [URLQueryItem(name: "key", value: uniqueKey()), URLQueryItem(name: "failures", value: "1")])
            case 2: request = try APIRequest(.get, path: ["api", "users", "99"])
            case 3: request = try APIRequest(.get, path: ["api", "protected", "me"])
            default: request = try APIRequest(.get, path: ["api", "users", "1"], query: [URLQueryItem(name: "delay", value: "5")])
            }
            request[option: DeduplicateRequest.self] = index % 2 == 0
            let task = Task { [request] in
                let outcome: String
                do { outcome = "\(try await chain.load(request).status.code)" } catch { outcome = (error as? CatenaError)?.code.rawValue ?? "\(error)" }
                completions.add("\(index)")
                outcomes.add(outcome)
            }
            tasks.append(task)
        }
        try await Task.sleep(for: .milliseconds(500))
        for (index, task) in tasks.enumerated() where index % 5 == 4 { task.cancel() }
        for task in tasks { await task.value }

        #expect(completions.all.count == 60)
        #expect(completions.all.values.allSatisfy { $0 == 1 })
        let seen = outcomes.all
        #expect(seen["200"] == 36, "users, flaky after a retry, protected: \(seen)")
        #expect(seen[CatenaError.Code.unacceptableStatus.rawValue] == 12, "\(seen)")
        #expect(seen[CatenaError.Code.cancelled.rawValue] == 12, "\(seen)")
    }
}
