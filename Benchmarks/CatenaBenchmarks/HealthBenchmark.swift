import Catena
import CatenaAsyncHTTPClient
import CatenaDemoServer
import Foundation
import HTTPTypes

/// The health middleware against the demo server's quotas and outages and the
/// misbehaving server's slow tail (`--only health`), each with and without the
/// middleware in one run:
/// - rate limits: 8 clients (one X-Client each, one shared limiter partitioned by it)
///   each make 1 call, then 100 at once, against 50 calls a second; 429s and wall time
///   against the quota's minimum, (⌈101 / 50⌉ − 1) × 1 s;
/// - a retry storm: 64 callers, each calling every 100 ms with 4 attempts, against a
///   backend that fails for 10 s; the extra calls the server got (retries), against the
///   budget's share (1 a second over the run and its 10 s window); then with a circuit
///   breaker as well, how fast its refusals are;
/// - hedging: 8 workers × 250 calls to a route whose every 100th answer takes 200 ms;
///   latency percentiles without hedging and with it (at the origin's p95).
func healthBenchmark(base: URL, rounds: Int) async throws {
    let environment = ServerEnvironment(baseURL: base)!
    let transport = AsyncHTTPClientTransport(timeout: .seconds(30))
    print("## API health (`--only health`)")
    print()
    try await rateLimitRows(environment: environment, transport: transport, rounds: rounds)
    try await retryStormRows(environment: environment, transport: transport)
    try await hedgingRows(transport: transport)
}

private func rateLimitRows(environment: ServerEnvironment, transport: AsyncHTTPClientTransport, rounds: Int) async throws {
    let quota = 50, clients = 8, fanOut = 100
    let minimum = Double((fanOut + 1 + quota - 1) / quota - 1)
    print("Rate limits: \(clients) clients × (1 + \(fanOut) calls) against \(quota) calls/s each; minimum \(format(minimum, 1)) s.")
    print()
    print("| fields | limiter | 429s (median of \(rounds)) | wall, s (median) | × minimum |")
    print("|---|---|---:|---:|---:|")
    let name = HTTPField.Name("X-Client")!
    for style in ["ietf", "x"] {
        for paced in [false, true] {
            var refusals: [Double] = [], walls: [Double] = []
            for _ in 0..<rounds {
                let limiter = RateLimitMiddleware(partition: { $0.originKey + " " + ($0.headerFields[name] ?? "") })
                let chain: any HTTPLoader =
                    paced ? EnvironmentMiddleware(environment) --> limiter --> transport : EnvironmentMiddleware(environment) --> transport
                let run = UUID().uuidString
                let start = ContinuousClock.now
                let refused = try await withThrowingTaskGroup(of: Int.self) { group in
                    for client in 0..<clients {
                        group.addTask {
                            let request = try APIRequest(
                                .get, path: ["api", "limited"],
                                query: [.init(name: "quota", value: "\(quota)"), .init(name: "window", value: "1"), .init(name: "style", value: style)],
                                headerFields: [name: "\(run)-\(client)"])
                            var refused = try await chain.load(request).status.code == 429 ? 1 : 0
                            refused += try await withThrowingTaskGroup(of: Int.self) { calls in
                                for _ in 0..<fanOut { calls.addTask { try await chain.load(request).status.code == 429 ? 1 : 0 } }
                                return try await calls.reduce(0, +)
                            }
                            return refused
                        }
                    }
                    return try await group.reduce(0, +)
                }
                walls.append((ContinuousClock.now - start).seconds)
                refusals.append(Double(refused))
            }
            let wall = median(walls)
            print(
                "| \(style == "ietf" ? "RateLimit, RateLimit-Policy" : "X-RateLimit-* (epoch reset)") | \(paced ? "RateLimitMiddleware" : "none") | \(format(median(refusals), 0)) | \(format(wall, 2)) | \(paced ? format(wall / minimum, 2) : "–") |"
            )
        }
    }
    print()
}

/// Counts the attempts that reach the transport: first ones and retries.
private struct AttemptCounter: HTTPMiddleware {
    let counts = Locked((first: 0, retries: 0))
    func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        counts.withLock { if request[option: RetryAttempt.self] == 1 { $0.first += 1 } else { $0.retries += 1 } }
        return try await next.load(request)
    }
}

/// Times the attempts a circuit breaker below refuses.
private struct RefusalTimer: HTTPMiddleware {
    let refusals = Locked([Duration]())
    func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        let start = ContinuousClock.now
        do {
            return try await next.load(request)
        } catch {
            if error.code == .circuitOpen { refusals.withLock { $0.append(ContinuousClock.now - start) } }
            throw error
        }
    }
}

private func retryStormRows(environment: ServerEnvironment, transport: AsyncHTTPClientTransport) async throws {
    let callers = 64, failFor = 10.0, every = Duration.milliseconds(100)
    print("A retry storm: \(callers) callers, a call each every 100 ms with up to 4 attempts, against a backend down for \(Int(failFor)) s.")
    print()
    print("| chain | calls | first attempts sent | retries sent | budget's share | attempts refused by the circuit | refusal p50 / p99, µs |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for variant in ["retry", "retry + budget", "retry + budget + circuit breaker"] {
        let key = UUID().uuidString
        let budget = RetryBudget()
        let counter = AttemptCounter(), timer = RefusalTimer()
        let retry = RetryMiddleware(RetryStrategy(maxAttempts: 4, baseDelay: .milliseconds(50)), budget: variant == "retry" ? nil : budget)
        let chain: any HTTPLoader =
            variant.hasSuffix("breaker")
            ? EnvironmentMiddleware(environment) --> retry --> timer --> CircuitBreakerMiddleware() --> counter --> ValidationMiddleware() --> transport
            : EnvironmentMiddleware(environment) --> retry --> counter --> ValidationMiddleware() --> transport
        let request = try APIRequest(
            .get, path: ["api", "outage"], query: [.init(name: "key", value: key), .init(name: "fail", value: "\(failFor)")])
        let start = ContinuousClock.now
        let made = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<callers {
                group.addTask {
                    var calls = 0
                    var next = ContinuousClock.now
                    while ContinuousClock.now - start < .seconds(failFor) {
                        _ = try? await chain.load(request)
                        calls += 1
                        next += every
                        try? await Task.sleep(until: next)
                    }
                    return calls
                }
            }
            return await group.reduce(0, +)
        }
        let elapsed = (ContinuousClock.now - start).seconds
        let counts = counter.counts.withLock { $0 }
        let refusals = timer.refusals.withLock { $0 }.sorted()
        let share = variant == "retry" ? "–" : format(budget.minimumPerSecond * (elapsed + budget.window.seconds), 0)
        let refusalTimes =
            refusals.isEmpty
            ? "–" : "\(format(percentile(refusals, 0.5).milliseconds * 1000, 0)) / \(format(percentile(refusals, 0.99).milliseconds * 1000, 0))"
        print("| \(variant) | \(made) | \(counts.first) | \(counts.retries) | \(share) | \(refusals.count) | \(refusalTimes) |")
    }
    print()
}

private func hedgingRows(transport: AsyncHTTPClientTransport) async throws {
    let server = try await MisbehavingServer.start()
    let workers = 8, calls = 250
    print("Hedging: \(workers) workers × \(calls) calls; every 100th answer takes 200 ms.")
    print()
    print("| chain | p50, ms | p99, ms | p99.9, ms | hedges sent | hedges won | connections opened |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for variant in ["transport alone", "HedgeMiddleware (fixed 1 s: no hedge sent, its cost alone)", "HedgeMiddleware (p95)"] {
        let hedged = variant != "transport alone"
        let sent = Locked(0), won = Locked(0)
        let hedge = variant.contains("fixed") ? HedgeMiddleware(after: .fixed(.seconds(1))) : HedgeMiddleware()
        let observer = CallObserver { event in
            if case .hedgeSent = event { sent.withLock { $0 += 1 } }
            if event == .hedgeWon { won.withLock { $0 += 1 } }
        }
        let chain: any HTTPLoader = hedged ? hedge --> transport : transport
        let connections = server.connectionsAccepted
        let url = server.url(.slowTail).absoluteString + "?every=100&ms=200"
        let latencies = try await withThrowingTaskGroup(of: [Duration].self) { group in
            for _ in 0..<workers {
                group.addTask {
                    var times: [Duration] = []
                    for _ in 0..<calls {
                        var request = try APIRequest(urlString: url)
                        request.observe(observer)
                        let began = ContinuousClock.now
                        _ = try await chain.load(request)
                        times.append(ContinuousClock.now - began)
                    }
                    return times
                }
            }
            return try await group.reduce(into: [Duration]()) { $0 += $1 }.sorted()
        }
        print(
            "| \(variant) | \(format(percentile(latencies, 0.5).milliseconds, 1)) | \(format(percentile(latencies, 0.99).milliseconds, 1)) | \(format(percentile(latencies, 0.999).milliseconds, 1)) | \(sent.withLock { $0 }) | \(won.withLock { $0 }) | \(server.connectionsAccepted - connections) |"
        )
    }
    await server.stop()
    print()
}
