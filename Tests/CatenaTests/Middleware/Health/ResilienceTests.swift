import Catena
import CatenaDemoServer
import CatenaTesting
import Foundation
import HTTPTypes
import Testing
@testable import CatenaTestSupport

private func flaky(_ key: String, fail: Double) throws -> APIRequest {
    try APIRequest(.get, path: ["api", "outage"], query: [.init(name: "key", value: key), .init(name: "fail", value: "\(fail)")])
}

private func flakyStats(_ key: String) async throws -> FlakyStats {
    let chain = EnvironmentMiddleware(try await TestServer.environment()) --> TransportKind.asyncHTTPClient.make()
    return try await chain.load(try APIRequest(.get, path: ["api", "outage", "stats"], query: [.init(name: "key", value: key)]))
        .decode(FlakyStats.self)
}

@Suite("CircuitBreakerMiddleware against a backend that fails and recovers")
struct CircuitBreakerTests {
    @Test(
        "open after 3 failures in a row: calls fail at once and reach nothing; a probe after the cool-down; success closes", arguments: TransportKind.allCases)
    func opensProbesCloses(kind: TransportKind) async throws {
        let down = uniqueKey(), up = uniqueKey()
        let clock = ManualClock()
        let log = EventLog()
        let breaker = CircuitBreakerMiddleware(.init(consecutiveFailures: 3, failureRate: nil, coolDown: .seconds(5)), clock: clock)
        let chain = log.observer --> EnvironmentMiddleware(try await TestServer.environment()) --> breaker --> kind.make()
        for _ in 0..<3 { #expect(try await chain.load(try flaky(down, fail: 600)).status == .serviceUnavailable) }
        #expect(log.all.filter { $0 == .circuit(.open) }.count == 1)
        let refused = await #expect(throws: CatenaError.self) { try await chain.load(try flaky(down, fail: 600)) }
        #expect(refused?.code == .circuitOpen)
        #expect(refused?.detail?.contains("after 3 failures in a row; it lets a call try again in 5.0 s") == true)
        #expect(try await flakyStats(down).calls == 3)

        clock.advance(.seconds(5))
        // The probe fails: open again for another cool-down.
        #expect(try await chain.load(try flaky(down, fail: 600)).status == .serviceUnavailable)
        #expect(log.all.filter { $0 == .circuit(.halfOpen) }.count == 1)
        #expect(log.all.filter { $0 == .circuit(.open) }.count == 2)
        #expect(breaker.state(for: try await request(for: kind)) == .open)
        clock.advance(.seconds(5))
        #expect(try await chain.load(try flaky(up, fail: 0)).status == .ok)
        #expect(log.all.last == .circuit(.closed))
        #expect(try await chain.load(try flaky(up, fail: 0)).status == .ok)
        #expect(try await flakyStats(down).calls == 4)
    }

    private func request(for kind: TransportKind) async throws -> APIRequest {
        let environment = try await TestServer.environment()
        return try APIRequest(urlString: "http://127.0.0.1:\(environment.port ?? 0)/")
    }

    @Test("4xx never opens it; a failure rate over the window does; one probe at a time")
    func rateAndProbe() async throws {
        let clock = ManualClock()
        let transport = MockTransport()
        let arrived = AsyncStream<Void>.makeStream(), release = AsyncStream<Void>.makeStream()
        transport.on(nil, "not-found", status: .notFound)
        transport.on(nil, "down", status: .badGateway)
        transport.on(nil, "slow") { request throws(CatenaError) in
            arrived.continuation.yield()
            for await _ in release.stream { break }
            return APIResponse(status: .ok, request: request)
        }
        let breaker = CircuitBreakerMiddleware(.init(consecutiveFailures: 100, failureRate: 0.5, minimumCalls: 10), clock: clock)
        let chain = breaker --> transport
        let origin = try APIRequest(urlString: "https://api.example/")
        func call(_ path: String) async -> Result<APIResponse, CatenaError> {
            do throws(CatenaError) {
                return .success(try await chain.load(try APIRequest(urlString: "https://api.example/" + path)))
            } catch {
                return .failure(error)
            }
        }
        for _ in 0..<20 { _ = await call("not-found") }
        #expect(breaker.state(for: origin) == .closed)
        for _ in 0..<19 { _ = await call("down") }
        #expect(breaker.state(for: origin) == .closed)  // 19 failures in 39 calls
        _ = await call("down")
        #expect(breaker.state(for: origin) == .open)  // 20 in 40: half
        #expect(transport.requests.count == 40)
        if case .failure(let error) = await call("down") { #expect(error.code == .circuitOpen) } else { Issue.record("sent while open") }
        #expect(transport.requests.count == 40)

        clock.advance(.seconds(5))
        #expect(breaker.state(for: origin) == .halfOpen)
        let probe = Task { await call("slow") }
        var arrivals = arrived.stream.makeAsyncIterator()
        await arrivals.next()
        if case .failure(let error) = await call("slow") {
            #expect(error.code == .circuitOpen)
            #expect(error.detail?.contains("a probe call is deciding") == true)
        } else {
            Issue.record("a second call went through beside the probe")
        }
        release.continuation.yield()
        #expect((try? await probe.value.get())?.status == .ok)
        #expect(breaker.state(for: origin) == .closed)
    }

    @Test("a cancelled probe lets the next call probe")
    func cancelledProbe() async throws {
        let clock = ManualClock()
        let transport = MockTransport()
        transport.on(nil, "down", status: .serviceUnavailable)
        transport.on(nil, "cancelled") { request throws(CatenaError) in throw CatenaError(.cancelled, request: request) }
        transport.on(nil, "up", status: .ok)
        let breaker = CircuitBreakerMiddleware(.init(consecutiveFailures: 1), clock: clock)
        let chain = breaker --> transport
        _ = try await chain.load(try APIRequest(urlString: "https://api.example/down"))
        clock.advance(.seconds(5))
        await #expect(throws: CatenaError.self) { try await chain.load(try APIRequest(urlString: "https://api.example/cancelled")) }
        #expect(breaker.state(for: try APIRequest(urlString: "https://api.example/")) == .halfOpen)
        #expect(try await chain.load(try APIRequest(urlString: "https://api.example/up")).status == .ok)
        #expect(breaker.state(for: try APIRequest(urlString: "https://api.example/")) == .closed)
    }
}

@Suite("RetryBudget: retries limited to a share of successful calls")
struct RetryBudgetTests {
    @Test("a backend that fails for everyone gets the floor's retries, then each call fails with retryBudgetExhausted", arguments: TransportKind.allCases)
    func floor(kind: TransportKind) async throws {
        let key = uniqueKey()
        let log = EventLog()
        // A clock that stands still: the window never slides, however slow the run.
        let budget = RetryBudget(ratio: 0.1, minimumPerSecond: 0.2, window: .seconds(10), clock: ManualClock())  // 2 retries in the window
        let retry = RetryMiddleware(RetryStrategy(maxAttempts: 4, baseDelay: .milliseconds(1), jitter: false), budget: budget)
        let chain =
            log.observer --> EnvironmentMiddleware(try await TestServer.environment()) --> retry --> ValidationMiddleware() --> kind.make()
        var codes: [CatenaError.Code] = []
        for _ in 0..<4 {
            do {
                _ = try await chain.load(try flaky(key, fail: 600))
            } catch let error as CatenaError {
                codes.append(error.code)
                if error.code == .retryBudgetExhausted {
                    #expect((error.underlyingError as? CatenaError)?.code == .unacceptableStatus)
                    #expect(error.response?.status == .serviceUnavailable)
                    #expect(error.problem?.title == "The backend is unavailable")
                }
            }
        }
        #expect(codes == Array(repeating: .retryBudgetExhausted, count: 4))
        // 4 calls and 2 retries; the server may see more when a transport resends a call
        // whose reused connection had closed.
        #expect(log.all.filter { if case .retrying = $0 { true } else { false } }.count == 2)
        #expect(try await flakyStats(key).calls >= 6)
        #expect(log.all.filter { $0 == .retryBudgetExhausted }.count == 4)
    }

    @Test("successes earn retries: ratio × successes on top of the floor")
    func earned() async throws {
        let budget = RetryBudget(ratio: 0.5, minimumPerSecond: 0, window: .seconds(10))
        let request = try APIRequest(urlString: "https://api.example/")
        #expect(budget.available(for: request) == 0)
        #expect(!budget.withdraw(for: request))
        for _ in 0..<4 { budget.recordSuccess(for: request) }
        #expect(budget.available(for: request) == 2)
        #expect(budget.withdraw(for: request))
        #expect(budget.withdraw(for: request))
        #expect(!budget.withdraw(for: request))
        #expect(budget.available(for: try APIRequest(urlString: "https://other.example/")) == 0)  // per origin
        budget.reset()
        #expect(budget.available(for: request) == 0)
    }
}

@Suite("HedgeMiddleware against a slow tail")
struct HedgeTests {
    @Test("a slow first attempt is hedged; the fast hedge wins and the slow one is cancelled", arguments: TransportKind.allCases, [false, true])
    func hedges(kind: TransportKind, streamed: Bool) async throws {
        // A server of its own: the tail counts every request it gets.
        let server = try await MisbehavingServer.start()
        defer { Task { await server.stop() } }
        let log = EventLog()
        // Long enough that a fast answer on a loaded run (the whole suite) never takes
        // it, and well inside the slow answer's 10 s, under ThreadSanitizer too (a longer
        // delay would outlast the slow answer, and nothing would be hedged).
        let delay = max(.seconds(2), Timing.stretch(.milliseconds(500)))
        let chain = log.observer --> HedgeMiddleware(after: .fixed(delay)) --> kind.make(timeout: .seconds(30))
        let url = server.url(.slowTail).absoluteString + "?every=2&ms=10000"
        func body() async throws -> String {
            let request = try APIRequest(urlString: url)
            if streamed {
                let response = try await chain.stream(request)
                return String(decoding: try await response.body.collect(upTo: 1 << 20), as: UTF8.self)
            }
            return String(decoding: try await chain.load(request).body, as: UTF8.self)
        }
        #expect(try await body() == #"{"slow":false}"#)  // request 1: fast, no hedge
        // The hedge's events, without each exchange's own (its connection and head).
        let hedging = {
            log.all.filter {
                switch $0 {
                case .responseHead, .connection: false
                default: true
                }
            }
        }
        #expect(hedging().isEmpty)
        #expect(try await body() == #"{"slow":false}"#)  // request 2 is slow; the hedge, 3, answers
        #expect(hedging() == [.hedgeSent(after: delay), .hedgeWon])
    }

    @Test("a POST is never hedged, and a spent budget stops hedging")
    func notHedged() async throws {
        let transport = MockTransport()
        let arrived = AsyncStream<Void>.makeStream()
        transport.on(nil, "**") { request throws(CatenaError) in
            arrived.continuation.yield()
            try? await Task.sleep(for: .milliseconds(200))
            return APIResponse(status: .ok, request: request)
        }
        let log = EventLog()
        let budget = RetryBudget(ratio: 0, minimumPerSecond: 0)
        let chain = log.observer --> HedgeMiddleware(after: .fixed(.milliseconds(1)), budget: budget) --> transport
        _ = try await chain.load(try APIRequest(.post, urlString: "https://api.example/x"))
        #expect(transport.requests.count == 1)
        _ = try await chain.load(try APIRequest(urlString: "https://api.example/x"))
        #expect(transport.requests.count == 2)
        #expect(log.all == [.retryBudgetExhausted])
    }
}

@Suite("ProblemDetails: RFC 9457 bodies on errors, in logs and from hostile servers")
struct ProblemDetailsTests {
    @Test("the RFC's example, through Validation, on both transports", arguments: TransportKind.allCases)
    func example(kind: TransportKind) async throws {
        let chain = EnvironmentMiddleware(try await TestServer.environment()) --> ValidationMiddleware() --> kind.make()
        let error = await #expect(throws: CatenaError.self) { try await chain.load(try APIRequest(.get, path: ["api", "problem"])) }
        let problem = try #require(error?.problem)
        #expect(problem.type == "https://example.com/probs/out-of-credit")
        #expect(problem.title == "You do not have enough credit.")
        #expect(problem.detail == "Your current balance is 30, but that costs 50.")
        #expect(problem.instance == "/account/12345/msgs/abc")
        #expect(problem.status == 403)
        #expect(problem.extensions["balance"] == .number(30))
        #expect(problem.extensions["accounts"] == .array([.string("/account/12345"), .string("/account/67890")]))
        #expect(error?.description.hasSuffix("unacceptable status 403 Forbidden (You do not have enough credit.)") == true)
    }

    @Test("a hostile problem: wrong types ignored, escapes and newlines gone from what is shown, nothing traps", arguments: TransportKind.allCases)
    func hostile(kind: TransportKind) async throws {
        let server = try await FaultServer.running()
        let response = try await kind.make().load(faultRequest(.hostileProblem, on: server))
        let problem = try #require(response.problem)
        #expect(problem.type == "about:blank")  // 42 is not a string
        #expect(problem.status == nil)  // "oops" is not a number
        #expect(problem.instance == nil)
        #expect(problem.title?.contains("\u{1B}") == true)
        let shown = try #require(problem.displayTitle)
        #expect(!shown.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x1B || $0.value == 0x202E })
        #expect(try #require(problem.displayDetail).count <= 1001)
        let error = CatenaError(.unacceptableStatus, request: response.request, response: response)
        #expect(!error.description.unicodeScalars.contains { $0.value < 0x20 })
    }

    @Test("a problem's text that echoes the request's credentials is scrubbed of them")
    func echoedSecrets() throws {
        let request = try APIRequest(
            .get, urlString: "https://api.example/x?api_key=k3y-value&page=2", headerFields: [.authorization: "Bearer t0ken-value"])
        let detail = "token t0ken-value (Bearer t0ken-value) and key k3y-value are not valid for page 2"
        #expect(Redaction.default.scrub(detail, secretsOf: request) == "token <redacted> (<redacted>) and key <redacted> are not valid for page 2")
        let basic = try APIRequest(
            .get, urlString: "https://api.example/x?token=a%2Fb%2Fc%2Fd",
            headerFields: [.authorization: "Basic \(Data("neo:s3cr3t-pass".utf8).base64EncodedString())", .cookie: "a=1; session=c00kie-value"])
        let echoed = "neo:s3cr3t-pass, password s3cr3t-pass, session c00kie-value, token a/b/c/d or a%2Fb%2Fc%2Fd"
        #expect(
            Redaction.default.scrub(echoed, secretsOf: basic)
                == "<redacted>, password <redacted>, session <redacted>, token <redacted> or <redacted>")
        // Scrubbed before the cut: a secret across the 1,000th character is not half shown.
        let long = ProblemDetails(detail: String(repeating: "x", count: 995) + "t0ken-value")
        #expect(long.displayed(for: request, redaction: .default).detail?.contains("t0ke") == false)
    }

    @Test("not a problem: another media type, or a body that is not a JSON object")
    func notProblems() throws {
        let request = try APIRequest(urlString: "https://api.example/")
        #expect(
            APIResponse(status: .badRequest, headerFields: [.contentType: "application/json"], body: Data(#"{"title":"x"}"#.utf8), request: request).problem
                == nil)
        #expect(
            APIResponse(status: .badRequest, headerFields: [.contentType: "application/problem+json"], body: Data("[1]".utf8), request: request).problem == nil)
        #expect(
            APIResponse(status: .badRequest, headerFields: [.contentType: "Application/Problem+JSON; charset=utf-8"], body: Data("{}".utf8), request: request)
                .problem == ProblemDetails())
    }
}
