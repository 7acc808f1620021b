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

struct Settings {
    var requests = 2000
    var rounds = 15
    var inFlight = 64
    /// The sections to run; all by default.
    static let allSections: Set<String> = ["http", "https", "operations", "cache", "soak", "stream", "observability", "openapi", "hostile"]
    var sections = Self.allSections
    /// Calls per transport in the soak.
    var soakRequests = 100_000
    /// Only this row of the soak (each row is best measured in a process of its own).
    var soakRow: Int?
    /// The demo server in a process of its own (`--server-process`, with `--only http` or `stream`):
    /// CPU per request is then the client's alone, and the client's event loops serve no
    /// server. (The fan-out at the end still starts its photo server in this process; it
    /// reports wall time only.)
    var serverProcess = false
    /// The stream and HTTPS sections' clients on a group of this many event loops of
    /// their own (`--loops N`), not the shared two.
    var loops: Int?

    init(arguments: [String]) {
        var iterator = arguments.dropFirst().makeIterator()
        while let argument = iterator.next() {
            if argument == "--server-process" {
                serverProcess = true
                continue
            }
            let text = iterator.next()
            let value = text.flatMap(Int.init)
            switch (argument, value) {
            case ("--requests", let value?): requests = value
            case ("--rounds", let value?): rounds = value
            case ("--in-flight", let value?): inFlight = value
            case ("--soak-requests", let value?): soakRequests = value
            case ("--soak-row", let value?): soakRow = value
            case ("--loops", let value?) where value >= 1: loops = value
            case ("--only", _) where text.map(Self.allSections.contains) == true:
                sections = [text!]
            default:
                print(
                    "usage: CatenaBenchmarks [--requests N] [--rounds N] [--in-flight N] [--soak-requests N] [--soak-row 0-3] [--server-process] [--loops N] [--only http|https|operations|cache|soak|stream|observability|openapi|hostile]"
                )
                exit(2)
            }
        }
    }
}

/// One way of sending "GET /api/users/2", with or without decoding the body.
struct Variant: Sendable {
    let name: String
    let send: @Sendable (_ decode: Bool) async throws -> Void
}

/// Latencies of one round and its wall time.
struct Round {
    var wall: Duration
    var latencies: [Duration]
    /// Process CPU time (user + system, client and in-process server) per request.
    var cpuPerRequest: Duration = .zero
    var throughput: Double { Double(latencies.count) / wall.seconds }
}

/// User + system CPU time of this process so far.
func processCPUTime() -> Duration {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    func duration(_ time: timeval) -> Duration { .seconds(time.tv_sec) + .microseconds(time.tv_usec) }
    return duration(usage.ru_utime) + duration(usage.ru_stime)
}

/// Runs the variants in turn, one request each, `count` times: the variants see the
/// same conditions within microseconds of each other.
func runInterleaved(_ variants: [Variant], count: Int) async throws -> [Round] {
    var latencies = Array(repeating: [Duration](), count: variants.count)
    let clock = ContinuousClock()
    for iteration in 0..<count {
        // Rotate who goes first, so no variant always follows the same one.
        for offset in 0..<variants.count {
            let index = (iteration + offset) % variants.count
            let begin = clock.now
            try await variants[index].send(true)
            latencies[index].append(clock.now - begin)
        }
    }
    return latencies.map { Round(wall: $0.reduce(.zero, +), latencies: $0) }
}

func runConcurrent(_ variant: Variant, count: Int, inFlight: Int) async throws -> Round {
    let clock = ContinuousClock()
    let cpuStart = processCPUTime()
    let start = clock.now
    var latencies: [Duration] = []
    latencies.reserveCapacity(count)
    try await withThrowingTaskGroup(of: Duration.self) { group in
        var started = 0
        func startOne() {
            started += 1
            group.addTask {
                let begin = clock.now
                try await variant.send(false)
                return clock.now - begin
            }
        }
        while started < min(inFlight, count) { startOne() }
        while let latency = try await group.next() {
            latencies.append(latency)
            if started < count { startOne() }
        }
    }
    return Round(wall: clock.now - start, latencies: latencies, cpuPerRequest: (processCPUTime() - cpuStart) / count)
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
    var milliseconds: Double { seconds * 1000 }
}

func percentile(_ sorted: [Duration], _ p: Double) -> Duration {
    sorted[min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)]
}

struct Summary {
    let throughput: Double
    let p50: Duration
    let p99: Duration
    let cpuPerRequest: Duration

    /// Median throughput over the rounds; latency percentiles over every request.
    init(rounds: [Round]) {
        throughput = median(rounds.map(\.throughput))
        cpuPerRequest = .microseconds(median(rounds.map { $0.cpuPerRequest.milliseconds * 1000 }))
        let all = rounds.flatMap(\.latencies).sorted()
        p50 = percentile(all, 0.50)
        p99 = percentile(all, 0.99)
    }
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.count.isMultiple(of: 2) ? (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2 : sorted[sorted.count / 2]
}

func format(_ value: Double, _ decimals: Int) -> String { String(format: "%.\(decimals)f", value) }

@main
enum Benchmarks {
    static func main() async throws {
        if CommandLine.arguments.contains("--serve") {
            // The child `--server-process` starts.
            try await ServerProcess.serve({ try await DemoServer.start(logLevel: .error) }, url: \.baseURL)
        }
        let settings = Settings(arguments: CommandLine.arguments)
        guard !settings.serverProcess || settings.sections == ["http"] || settings.sections == ["stream"] else {
            // The other sections' tables say the server's CPU is in theirs, and some start
            // servers of their own in this process.
            print("--server-process goes with --only http or --only stream")
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
        let ahcChain = ApplyEnvironment(environment) --> LogMiddleware(logger: quiet) --> ahcAlone

        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.httpShouldSetCookies = false
        configuration.httpMaximumConnectionsPerHost = settings.inFlight
        let rawSession = URLSession(configuration: configuration)
        let gatheringSession = GatheringSession(configuration: configuration)
        let urlSessionAlone = URLSessionTransport(configuration: configuration)
        let urlSessionChain = ApplyEnvironment(environment) --> LogMiddleware(logger: quiet) --> urlSessionAlone
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
        report("\(settings.requests) sequential GET + decode", group, rounds, cpu: false)
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
        report("\(settings.requests) GET, \(settings.inFlight) in flight", group, rounds, cpu: true)
    }
}

/// One table row per variant: throughput, latency, CPU, and the ratios to the first.
func report(_ workload: String, _ group: [Variant], _ rounds: [[Round]], cpu: Bool) {
    for (index, variant) in group.enumerated() {
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
        print(
            "| \(workload) | \(variant.name) | \(format(summary.throughput, 0)) | \(format(summary.p50.milliseconds, 3)) | \(format(summary.p99.milliseconds, 3)) | \(cpuText) | \(ratio) | \(cpuRatio) |"
        )
    }
}

enum BenchmarkError: Error {
    case status(Int)
}

/// The photos fan-out (TWGOperations' Flickr example): getRecent, then 100 getSizes, 8 at a time, against a server that
/// adds 20 ms to every call; wall time against the ideal ceil(100/8) × 20 ms + 20 ms, and against the same calls made
/// with raw AsyncHTTPClient (`execute` + `collect` + JSON decoding, 8 at a time in a task group), in alternating
/// order round by round: what the server's sleeps and the machine add over the ideal, the raw run pays too.
func photosFanOut(rounds: Int) async throws {
    let latency = Duration.milliseconds(20)
    let server = try await DemoServer.start(photos: PhotoSettings(latency: latency), logLevel: .error)
    let client = Client(ApplyEnvironment(ServerEnvironment(baseURL: server.baseURL)!) --> AsyncHTTPClientTransport())
    // The raw calls move the same bytes: Catena's client configuration (gzip decoded) and
    // the Accept-Encoding Catena sends with it.
    let rawClient = HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: AsyncHTTPClientTransport.defaultConfiguration)
    let ideal = latency * ((100 + 7) / 8) + latency
    func catena() async throws {
        let photos = try await client.send(GetRecentEndpoint(perPage: 100)).photos.photo
        let sizes = try await client.sendAllOrFail(photos.map { GetSizesEndpoint(photoID: $0.id) }, maxConcurrent: 8)
        guard sizes.count == 100 else { throw BenchmarkError.status(sizes.count) }
    }
    func rawURL(_ items: [String: String]) -> String {
        let query = (["format": "json", "nojsoncallback": "1"].merging(items) { $1 }).map { URLQueryItem(name: $0, value: $1) }
        return server.baseURL.appending(path: "services/rest/").appending(queryItems: query).absoluteString
    }
    func raw() async throws {
        let recent = try await rawGet(rawURL(["method": "flickr.photos.getRecent", "per_page": "100", "page": "1"]), on: rawClient, as: RecentPhotos.self)
        let urls = recent.photos.photo.map { rawURL(["method": "flickr.photos.getSizes", "photo_id": $0.id]) }
        let count = try await withThrowingTaskGroup(of: PhotoSizes.self) { group in
            var next = 0
            var done = 0
            while next < min(8, urls.count) {
                let url = urls[next]
                group.addTask { try await rawGet(url, on: rawClient, as: PhotoSizes.self) }
                next += 1
            }
            while try await group.next() != nil {
                done += 1
                if next < urls.count {
                    let url = urls[next]
                    group.addTask { try await rawGet(url, on: rawClient, as: PhotoSizes.self) }
                    next += 1
                }
            }
            return done
        }
        guard count == 100 else { throw BenchmarkError.status(count) }
    }
    var walls: [Double] = [], rawWalls: [Double] = []
    for round in 0..<(rounds + 1) {
        // Alternating order: whichever goes first in a round does not always get the quieter machine.
        for catenaFirst in round.isMultiple(of: 2) ? [true, false] : [false, true] {
            let start = ContinuousClock.now
            if catenaFirst { try await catena() } else { try await raw() }
            let wall = (ContinuousClock.now - start).milliseconds
            if round > 0 { catenaFirst ? walls.append(wall) : rawWalls.append(wall) }  // round 0: warm-up
        }
    }
    let wall = median(walls), rawWall = median(rawWalls)
    print()
    print("| fan-out (AsyncHTTPClient), median of \(walls.count) | wall ms | best | ideal ms | wall / ideal | raw wall ms | raw / ideal | Catena / raw wall |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    print(
        "| getRecent + 100 getSizes, 8 at a time, 20 ms latency | \(format(wall, 1)) | \(format(walls.min()!, 1)) | \(format(ideal.milliseconds, 0)) | **\(format(wall / ideal.milliseconds, 3)) ×** | \(format(rawWall, 1)) | \(format(rawWall / ideal.milliseconds, 3)) × | **\(format(wall / rawWall, 3)) ×** |"
    )
    try await rawClient.shutdown()
    await server.stop()
}

/// A GET of `url` with raw AsyncHTTPClient, asking for gzip as Catena does, its JSON decoded.
func rawGet<Content: Decodable>(_ url: String, on client: HTTPClient, as type: Content.Type) async throws -> Content {
    var request = HTTPClientRequest(url: url)
    request.headers.add(name: "Accept-Encoding", value: ContentCoding.acceptEncoding)
    let response = try await client.execute(request, timeout: .seconds(30))
    let body = try await response.body.collect(upTo: 1 << 20)
    guard response.status == .ok else { throw BenchmarkError.status(Int(response.status.code)) }
    return try JSONDecoder().decode(Content.self, from: body)
}

/// How long a transport takes to return `cancelled` after its task is cancelled
/// mid-flight (the server would answer only after 5 s). Goal: under 100 ms.
func cancellationLatency(base: URL, ahc: any HTTPLoader, urlSession: any HTTPLoader) async throws {
    print()
    print("| cancellation mid-flight (50 requests each) | p50 ms | p99 ms | max ms |")
    print("|---|---:|---:|---:|")
    for (name, transport) in [("AsyncHTTPClientTransport", ahc), ("URLSessionTransport", urlSession)] {
        var latencies: [Duration] = []
        for _ in 0..<50 {
            let request = try APIRequest(.get, baseURL: base, path: ["api", "users", "1"], query: [URLQueryItem(name: "delay", value: "5")])
            let task = Task { try await transport.load(request) }
            try await Task.sleep(for: .milliseconds(30))
            let cancelledAt = ContinuousClock.now
            task.cancel()
            guard case .failure(let error) = await task.result, (error as? CatenaError)?.code == .cancelled else {
                throw BenchmarkError.status(-2)
            }
            latencies.append(ContinuousClock.now - cancelledAt)
        }
        latencies.sort()
        print(
            "| \(name) | \(format(percentile(latencies, 0.5).milliseconds, 3)) | \(format(percentile(latencies, 0.99).milliseconds, 3)) | \(format(latencies.last!.milliseconds, 3)) |"
        )
    }
}
