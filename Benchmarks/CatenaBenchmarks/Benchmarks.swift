// Catena's benchmark: each workload through the raw transport and through Catena over
// that transport, side by side in one run, against the demo server in this process
// (with `--server-process --only http|stream`, in a process of its own: CPU time is then the
// client's).
//
//   swift run -c release --enable-all-traits CatenaBenchmarks [--requests 2000] [--rounds 5] [--server-process]
//
// Throughput on this 2-core machine drifts by a third within one run (client and
// server share the cores), more than the effects measured here. So:
// - sequential: the variants take turns request by request, so each sees the same
//   conditions; throughput is 1 / mean latency;
// - 64 in flight: every round runs all variants back to back in rotating order, and
//   the ratios are medians of per-round ratios; CPU time per request (process-wide,
//   an in-process server included) is reported too, as it depends less on scheduling luck.
// Prints a Markdown table for BENCHMARKS.md.

import AsyncHTTPClient
import BenchmarkBaselines
import Catena
import CatenaAsyncHTTPClient
import CatenaDemoServer
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Logging
import NIOCore
import NIOFoundationCompat
import NIOPosix
import FlickrAPI
import ReqresAPI

@main
enum Benchmarks {
    static func main() async throws {
        if CommandLine.arguments.contains("--serve") {
            // The child `--server-process` starts.
            try await ServerProcess.serve({ try await DemoServer.start(logLevel: .error) }, url: \.baseURL)
        }
        let settings = Settings(arguments: CommandLine.arguments)
        guard !settings.serverProcess || [["http"], ["stream"], ["connection"]].contains(settings.sections) else {
            // The other sections' tables say the server's CPU is in theirs, and some start
            // servers of their own in this process.
            print("--server-process goes with --only http, stream or connection")
            exit(2)
        }
        let server: RunningDemoServer?
        let serverProcess: ServerProcess?
        let base: URL
        if settings.serverProcess {
            let process = try ServerProcess()
            (server, serverProcess, base) = (nil, process, process.baseURL)
        } else {
            let running = try await DemoServer.start(logLevel: .error)
            (server, serverProcess, base) = (running, nil, running.baseURL)
        }
        let userURL = base.appendingPathComponent("api/users/2")
        let environment = ServerEnvironment(baseURL: base)!
        let request = try UserEndpoint(id: 2).makeRequest()
        let quiet = Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() }
        let decoder = JSONDecoder()

        // Raw and Catena share one AsyncHTTPClient, so they reuse the same pooled
        // connections: with a client each, a connection's placement on the two
        // event-loop threads relative to the server's end biased one variant for a
        // whole run. URLSession cannot be shared: Catena makes its session itself, with
        // its own delegate, from the same configuration.
        let rawClient = HTTPClient(
            eventLoopGroup: MultiThreadedEventLoopGroup.singleton,
            configuration: AsyncHTTPClientTransport.defaultConfiguration)
        let ahcAlone = AsyncHTTPClientTransport(client: rawClient)
        let ahcChain = EnvironmentMiddleware(environment) --> LogMiddleware(logger: quiet) --> ahcAlone

        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.httpShouldSetCookies = false
        configuration.httpMaximumConnectionsPerHost = settings.inFlight
        let rawSession = URLSession(configuration: configuration)
        let gatheringSession = GatheringSession(configuration: configuration)
        let urlSessionAlone = URLSessionTransport(configuration: configuration)
        let urlSessionChain = EnvironmentMiddleware(environment) --> LogMiddleware(logger: quiet) --> urlSessionAlone
        let absolute = try APIRequest(.get, baseURL: base, path: ["api", "users", "2"])
        let absoluteWithProgress = {
            var request = absolute
            request[option: UploadProgress.self] = { _ in }
            return request
        }()

        /// The first variant of each group is the raw transport; the others are compared with it.
        let groups: [[Variant]] = [
            [
                Variant(name: "raw AsyncHTTPClient") { decode in
                    let response = try await rawClient.execute(HTTPClientRequest(url: userURL.absoluteString), timeout: .seconds(30))
                    let body = try await response.body.collect(upTo: 1 << 20)
                    guard response.status == .ok else { throw BenchmarkError.status(Int(response.status.code)) }
                    if decode { _ = try decoder.decode(SingleUser.self, from: body) }
                },
                Variant(name: "Catena transport alone") { decode in
                    let response = try await ahcAlone.load(absolute).validateStatus()
                    if decode { _ = try response.decode(SingleUser.self, decoder: decoder) }
                },
                Variant(name: "Catena chain (log + environment)") { decode in
                    let response = try await ahcChain.load(request).validateStatus()
                    if decode { _ = try response.decode(SingleUser.self, decoder: decoder) }
                },
                // The path every buffered call took before the delegate path: execute +
                // collect, the body read in a task of its own under an event-loop timer.
                // A call that watches upload progress still takes it; on a GET without a
                // body the watcher is never called, so this measures that path alone.
                Variant(name: "Catena transport, execute + collect path") { decode in
                    let response = try await ahcAlone.load(absoluteWithProgress).validateStatus()
                    if decode { _ = try response.decode(SingleUser.self, decoder: decoder) }
                },
                // What AsyncHTTPClient's delegate API costs by itself, the API Catena's
                // buffered path is built on: its own gathering delegate, no Catena.
                Variant(name: "raw AsyncHTTPClient, delegate API (ResponseAccumulator)") { decode in
                    let outgoing = try HTTPClient.Request(url: userURL.absoluteString)
                    let task = rawClient.execute(
                        request: outgoing, delegate: ResponseAccumulator(request: outgoing), deadline: .now() + .seconds(30))
                    let response = try await task.futureResult.get()
                    guard response.status == .ok, let body = response.body else { throw BenchmarkError.status(Int(response.status.code)) }
                    if decode { _ = try decoder.decode(SingleUser.self, from: body) }
                },
                // The same, started in one task on an event loop (`any()`), the caller
                // resumed from the future's callback there, as Catena starts calls made
                // beside others. (Catena starts a call made alone on its client's home
                // loop: the gap to this includes where a call starts, not only Catena's
                // own work.)
                Variant(name: "raw AsyncHTTPClient, delegate API started on an event loop (any())") { decode in
                    let outgoing = try HTTPClient.Request(url: userURL.absoluteString)
                    let loop = rawClient.eventLoopGroup.any()
                    let response = try await withCheckedThrowingContinuation { continuation in
                        loop.execute {
                            rawClient.execute(
                                request: outgoing, delegate: ResponseAccumulator(request: outgoing), eventLoop: .indifferent,
                                deadline: .now() + .seconds(30)
                            ).futureResult.whenComplete { continuation.resume(with: $0) }
                        }
                    }
                    guard response.status == .ok, let body = response.body else { throw BenchmarkError.status(Int(response.status.code)) }
                    if decode { _ = try decoder.decode(SingleUser.self, from: body) }
                },
            ],
            [
                Variant(name: "raw URLSession") { decode in
                    let (data, response) = try await rawSession.data(for: URLRequest(url: userURL))
                    guard (response as? HTTPURLResponse)?.statusCode == 200 else { throw BenchmarkError.status(-1) }
                    if decode { _ = try decoder.decode(SingleUser.self, from: data) }
                },
                Variant(name: "Catena transport alone") { decode in
                    let response = try await urlSessionAlone.load(absolute).validateStatus()
                    if decode { _ = try response.decode(SingleUser.self, decoder: decoder) }
                },
                Variant(name: "Catena chain (log + environment)") { decode in
                    let response = try await urlSessionChain.load(request).validateStatus()
                    if decode { _ = try response.decode(SingleUser.self, decoder: decoder) }
                },
                // What corelibs' delegate path costs by itself, the path Catena's Linux
                // fixes need: a session delegate gathering the body, no Catena.
                Variant(name: "raw URLSession, session delegate (data task, no Catena)") { decode in
                    let (data, status) = try await gatheringSession.data(for: URLRequest(url: userURL))
                    guard status == 200 else { throw BenchmarkError.status(status) }
                    if decode { _ = try decoder.decode(SingleUser.self, from: data) }
                },
            ],
        ]

        print("Catena benchmark: \(settings.requests) requests per round and variant, \(settings.rounds) paired rounds")
        let place = settings.serverProcess ? "in a process of its own (CPU figures are the client's alone)" : "in this process"
        print("server: demo server \(place) at \(base.absoluteString)")
        print("machine: \(ProcessInfo.processInfo.activeProcessorCount) cores, \(ProcessInfo.processInfo.operatingSystemVersionString)")
        print("date: \(Date().formatted(.iso8601))")
        print()
        if settings.sections.contains("operations") {
            try await operationChains(base: base, rounds: max(9, settings.rounds / 2))
        }
        if settings.sections.contains("cache") {
            try await cacheBenchmark(base: base, rounds: max(3, settings.rounds / 5))
            try await cacheStoreBenchmark(base: base, rounds: max(3, settings.rounds / 5))
        }
        if settings.sections.contains("stream") {
            // At least five rounds, as issue 23's goals are medians over five or more: a
            // 1 GiB round's ratio swings by half on this machine.
            try await streamBenchmark(base: base, rounds: max(5, settings.rounds / 3), serverInProcess: !settings.serverProcess, loops: settings.loops)
        }
        if settings.sections.contains("soak") {
            try await soakBenchmark(base: base, requests: settings.soakRequests, row: settings.soakRow)
        }
        if settings.sections.contains("openapi") {
            try await openAPIBenchmark(base: base, settings: settings)
        }
        if settings.sections.contains("observability") {
            try await observabilityBenchmark(base: base, settings: settings)
        }
        if settings.sections.contains("hostile") {
            try await hostileBenchmark()
        }
        if settings.sections.contains("https") {
            try await httpsBenchmark(settings: settings)
        }
        if settings.sections.contains("network") {
            try await networkBenchmark(settings: settings)
        }
        if settings.sections.contains("connection") {
            try await connectionViewBenchmark(base: base, settings: settings)
        }
        if settings.sections.contains("websocket") {
            try await webSocketBenchmark(rounds: max(5, settings.rounds / 3), requests: settings.requests)
        }
        if settings.sections.contains("health") {
            try await healthBenchmark(base: base, rounds: max(3, settings.rounds / 5))
        }
        guard settings.sections.contains("http") else {
            try await rawClient.shutdown()
            rawSession.invalidateAndCancel()
            await server?.stop()
            serverProcess?.stop()
            return
        }
        try await compare(groups, settings: settings)
        try await cancellationLatency(base: base, ahc: ahcAlone, urlSession: urlSessionAlone)
        try await photosFanOut(rounds: settings.rounds)

        try await rawClient.shutdown()
        rawSession.invalidateAndCancel()
        gatheringSession.session.invalidateAndCancel()
        await server?.stop()
        serverProcess?.stop()
    }
}

/// Prints the sequential and the concurrent table rows for each group; the first
/// variant of a group is the raw transport the others are compared with.
func compare(_ groups: [[Variant]], settings: Settings) async throws {
    print()
    print("| workload | variant | req/s | p50 ms | p99 ms | CPU µs/req | Catena / raw throughput | raw / Catena CPU |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for group in groups {
        // Catena's variants warm up first, so that the pool's connections are opened where
        // a client only Catena used would have them (its calls start on the transport's
        // home loop while none other is in flight). Raw `execute`'s `Transaction` takes a
        // connection on any loop alike; the delegate API's baselines start on `any()`.
        for variant in group.filter({ $0.name.hasPrefix("Catena") }) + group.filter({ !$0.name.hasPrefix("Catena") }) {
            _ = try await runConcurrent(variant, count: 300, inFlight: 8)
        }
        // Sequential: one request of each variant in turn; a round is `requests` each.
        var rounds = Array(repeating: [Round](), count: group.count)
        for _ in 0..<max(3, settings.rounds / 3) {
            for (index, round) in try await runInterleaved(group, count: settings.requests).enumerated() {
                rounds[index].append(round)
            }
        }
        report("\(settings.requests) sequential GET + decode", group.map(\.name), rounds, cpu: false)
    }
    for group in groups {
        // Concurrent: every variant runs a whole round, in rotating order.
        var rounds = Array(repeating: [Round](), count: group.count)
        for round in 0..<settings.rounds {
            for offset in 0..<group.count {
                let index = (round + offset) % group.count
                rounds[index].append(try await runConcurrent(group[index], count: settings.requests, inFlight: settings.inFlight))
            }
        }
        report("\(settings.requests) GET, \(settings.inFlight) in flight", group.map(\.name), rounds, cpu: true)
    }
}

/// One table row per variant: throughput, latency (unless the rounds timed no single
/// call), CPU, and the ratios to the first.
func report(_ workload: String, _ names: [String], _ rounds: [[Round]], cpu: Bool, latencies: Bool = true) {
    for (index, name) in names.enumerated() {
        let summary = Summary(rounds: rounds[index])
        var ratio = "", cpuRatio = ""
        if index > 0 {
            let ratios = zip(rounds[index], rounds[0]).map { $0.throughput / $1.throughput }
            ratio = "**\(format(100 * median(ratios), 1)) %** (\(format(100 * ratios.min()!, 0))–\(format(100 * ratios.max()!, 0)))"
            if cpu {
                let cpuRatios = zip(rounds[index], rounds[0]).map { $1.cpuPerRequest / $0.cpuPerRequest }
                cpuRatio = "\(format(100 * median(cpuRatios), 1)) %"
            }
        }
        let cpuText = cpu ? format(summary.cpuPerRequest.milliseconds * 1000, 0) : "–"
        let latency = latencies ? "\(format(summary.p50.milliseconds, 3)) | \(format(summary.p99.milliseconds, 3))" : "– | –"
        print("| \(workload) | \(name) | \(format(summary.throughput, 0)) | \(latency) | \(cpuText) | \(ratio) | \(cpuRatio) |")
    }
}
