import Catena
import CatenaAsyncHTTPClient
import CatenaTesting
import Foundation
import HTTPTypes
import Synchronization
import Testing
@testable import CatenaTestSupport

@Suite("ValidationMiddleware")
struct ValidateTests {
    @Test("unacceptable statuses and content types fail with the response; a request can widen what it accepts")
    func validate() async throws {
        let env = try await TestServer.environment()
        let chain = EnvironmentMiddleware(env) --> ValidationMiddleware(Acceptance(contentTypes: ["application/json"])) --> AsyncHTTPClientTransport.forTests()

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

@Suite("ThrottleMiddleware")
struct ThrottleTests {
    @Test("the server never sees more than the limit in flight; opted-out requests pass")
    func peakEqualsLimit() async throws {
        let key = uniqueKey()
        let chain = EnvironmentMiddleware(try await TestServer.environment()) --> ThrottleMiddleware(maxInFlight: 3) --> AsyncHTTPClientTransport.forTests()
        try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
            // 1 s each, so that three overlap at the server even on a loaded machine.
            for _ in 0..<12 { group.addTask { try await chain.load(try holdRequest(key, hold: 1)).status } }
            for try await status in group { #expect(status == .ok) }
        }
        let stats = try await inFlightStats(key)
        #expect(stats.peak == 3)
        #expect(stats.total == 12)

        let bypassKey = uniqueKey()
        try await withThrowingTaskGroup(of: Void.self) { group in
            // Held long enough (stretched) that four of six overlap on a loaded machine.
            for _ in 0..<6 {
                group.addTask {
                    var request = try holdRequest(bypassKey, hold: Timing.stretch(0.6))
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
        let throttle = ThrottleMiddleware(maxInFlight: 1)
        let chain = EnvironmentMiddleware(try await TestServer.environment()) --> throttle --> AsyncHTTPClientTransport.forTests()
        // The slot frees about 10 s after the cancel: leaving within 5 s proves the queue
        // did not wait for it, with room for a loaded machine.
        let first = Task { try await chain.load(try holdRequest(key, hold: Timing.stretch(10))) }
        #expect(await Timing.eventually { (try? await inFlightStats(key).current) == 1 })
        let queued = Task { try await chain.load(try holdRequest(key)) }
        #expect(await Timing.eventually { throttle.waiting == 1 })
        let cancelledAt = ContinuousClock.now
        queued.cancel()
        let error = (await queued.result).failure as? CatenaError
        #expect(error?.code == .cancelled)
        #expect(ContinuousClock.now - cancelledAt < Timing.stretch(.seconds(5)), "left the queue without waiting for the slot")
        #expect(throttle.waiting == 0)
        first.cancel()
        _ = await first.result
        #expect(try await inFlightStats(key).total == 1, "the cancelled request never reached the server")
    }
}

extension ThrottleTests {
    @Test("reset fails every waiting request with cancelled; the one in flight finishes")
    func resetFailsWaiters() async throws {
        let key = uniqueKey()
        let throttle = ThrottleMiddleware(maxInFlight: 1)
        let chain = EnvironmentMiddleware(try await TestServer.environment()) --> throttle --> AsyncHTTPClientTransport.forTests()
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

@Suite("Reset")
struct ResetTests {
    @Test("reset during 100 requests in flight completes them all with cancelled, rejects newcomers, then opens again")
    func resetInFlight() async throws {
        let resetGuard = ResetGuardMiddleware()
        let slow = SlowReset()
        let chain = resetGuard --> EnvironmentMiddleware(try await TestServer.environment()) --> slow --> AsyncHTTPClientTransport.forTests()
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
        let auth = TokenAuthMiddleware(hosts: [try await TestServer.authority()]) { _ in BearerToken(accessToken: UUID().uuidString) }
        let chain = ResetGuardMiddleware() --> EnvironmentMiddleware(env) --> auth --> AsyncHTTPClientTransport.forTests()
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
        let composite = Composite(
            [
                .init(
                    name: "basic",
                    loader: BasicAuthMiddleware(hosts: [try await TestServer.authority()], credentials: .init(user: "catena", password: "chains")) --> basic
                ) { $0.percentEncodedPath.hasPrefix("/api/basic") },
                .init(
                    name: "token",
                    loader: TokenAuthMiddleware(hosts: [try await TestServer.authority()], token: .init(accessToken: "tok")) { _ in .init(accessToken: "tok") }
                        --> token
                ) { $0.percentEncodedPath.hasPrefix("/api/protected") },
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
        let chain = EnvironmentMiddleware(try await TestServer.environment()) --> DeduplicationMiddleware() --> AsyncHTTPClientTransport.forTests()
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
        let dedupe = DeduplicationMiddleware()
        let chain = EnvironmentMiddleware(try await TestServer.environment()) --> dedupe --> AsyncHTTPClientTransport.forTests()
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
        let auth = TokenAuthMiddleware(hosts: [try await TestServer.authority()], refresh: try await AuthTests().oauth())
        let chain =
            ResetGuardMiddleware() --> EnvironmentMiddleware(env) --> DeduplicationMiddleware() --> ThrottleMiddleware(maxInFlight: 4)
            --> RetryMiddleware(RetryStrategy(jitter: false), clock: clock) --> ValidationMiddleware() --> auth --> AsyncHTTPClientTransport.forTests()

        let completions = Tally()
        let outcomes = Tally()
        var tasks: [Task<Void, Never>] = []
        for index in 0..<60 {
            var request: APIRequest
            switch index % 5 {
            case 0: request = try APIRequest(.get, path: ["api", "users", String(index % 12 + 1)])
            case 1:
                request = try APIRequest(
                    .get, path: ["api", "flaky"], query: [URLQueryItem(name: "key", value: uniqueKey()), URLQueryItem(name: "failures", value: "1")])
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
