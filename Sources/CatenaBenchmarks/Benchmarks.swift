// Catena's benchmark: each workload through the raw transport and through Catena over
// that transport, side by side in one run, against the demo server in this process.
//
//   swift run -c release CatenaBenchmarks [--requests 2000] [--rounds 5]
//
// Rounds alternate raw and Catena so that drift (other load, warm-up) hits both
// alike; each figure is the median round. Prints a Markdown table for BENCHMARKS.md.

import AsyncHTTPClient
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
import ReqresAPI

struct Settings {
    var requests = 2000
    var rounds = 5
    var inFlight = 64

    init(arguments: [String]) {
        var iterator = arguments.dropFirst().makeIterator()
        while let argument = iterator.next() {
            let value = iterator.next().flatMap(Int.init)
            switch (argument, value) {
            case ("--requests", let value?): requests = value
            case ("--rounds", let value?): rounds = value
            case ("--in-flight", let value?): inFlight = value
            default:
                print("usage: CatenaBenchmarks [--requests N] [--rounds N] [--in-flight N]")
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
    var throughput: Double { Double(latencies.count) / wall.seconds }
}

func runSequential(_ variant: Variant, count: Int) async throws -> Round {
    var latencies: [Duration] = []
    latencies.reserveCapacity(count)
    let clock = ContinuousClock()
    let start = clock.now
    for _ in 0..<count {
        let begin = clock.now
        try await variant.send(true)
        latencies.append(clock.now - begin)
    }
    return Round(wall: clock.now - start, latencies: latencies)
}

func runConcurrent(_ variant: Variant, count: Int, inFlight: Int) async throws -> Round {
    let clock = ContinuousClock()
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
    return Round(wall: clock.now - start, latencies: latencies)
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
    var milliseconds: Double { seconds * 1000 }
}

func percentile(_ sorted: [Duration], _ p: Double) -> Duration {
    sorted[min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)]
}

struct Summary {
    let name: String
    let throughput: Double
    let p50: Duration
    let p99: Duration

    init(name: String, rounds: [Round]) {
        self.name = name
        let byThroughput = rounds.sorted { $0.throughput < $1.throughput }
        throughput = byThroughput[byThroughput.count / 2].throughput
        let all = rounds.flatMap(\.latencies).sorted()
        p50 = percentile(all, 0.50)
        p99 = percentile(all, 0.99)
    }
}

func format(_ value: Double, _ decimals: Int) -> String { String(format: "%.\(decimals)f", value) }

@main
enum Benchmarks {
    static func main() async throws {
        let settings = Settings(arguments: CommandLine.arguments)
        let server = try await DemoServer.start(logLevel: .error)
        let base = server.baseURL
        let userURL = base.appendingPathComponent("api/users/2")
        let environment = ServerEnvironment(baseURL: base)!
        let request = try ReqresRequests.user(id: 2)
        let quiet = Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() }
        let decoder = JSONDecoder()

        // The same configuration for raw and Catena, each with its own client.
        let rawClient = HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton,
                                   configuration: AsyncHTTPClientTransport.defaultConfiguration)
        let ahcTransport = AsyncHTTPClientTransport(configuration: AsyncHTTPClientTransport.defaultConfiguration)
        let ahcChain = LogMiddleware(logger: quiet) --> ApplyEnvironment(environment) --> ahcTransport

        func makeSession() -> URLSession {
            let configuration = URLSessionConfiguration.ephemeral
            configuration.urlCache = nil
            configuration.httpShouldSetCookies = false
            configuration.httpMaximumConnectionsPerHost = settings.inFlight
            return URLSession(configuration: configuration)
        }
        let rawSession = makeSession()
        let urlSessionChain = LogMiddleware(logger: quiet) --> ApplyEnvironment(environment)
            --> URLSessionTransport(session: makeSession())

        let pairs: [(transport: String, raw: Variant, catena: Variant)] = [
            ("AsyncHTTPClient",
             Variant(name: "raw AsyncHTTPClient") { decode in
                 let response = try await rawClient.execute(HTTPClientRequest(url: userURL.absoluteString), timeout: .seconds(30))
                 let body = try await response.body.collect(upTo: 1 << 20)
                 guard response.status == .ok else { throw BenchmarkError.status(Int(response.status.code)) }
                 if decode { _ = try decoder.decode(SingleUser.self, from: body) }
             },
             Variant(name: "Catena + AsyncHTTPClient") { decode in
                 let response = try await ahcChain.load(request).validateStatus()
                 if decode { _ = try response.decode(SingleUser.self, decoder: decoder) }
             }),
            ("URLSession",
             Variant(name: "raw URLSession") { decode in
                 let (data, response) = try await rawSession.data(for: URLRequest(url: userURL))
                 guard (response as? HTTPURLResponse)?.statusCode == 200 else { throw BenchmarkError.status(-1) }
                 if decode { _ = try decoder.decode(SingleUser.self, from: data) }
             },
             Variant(name: "Catena + URLSession") { decode in
                 let response = try await urlSessionChain.load(request).validateStatus()
                 if decode { _ = try response.decode(SingleUser.self, decoder: decoder) }
             }),
        ]

        print("Catena benchmark: \(settings.requests) requests per round, \(settings.rounds) rounds, median round reported")
        print("server: demo server in this process at \(base.absoluteString)")
        print("machine: \(ProcessInfo.processInfo.activeProcessorCount) cores, \(ProcessInfo.processInfo.operatingSystemVersionString)")
        print("date: \(Date().formatted(.iso8601))")
        print()
        print("| workload | variant | req/s | p50 ms | p99 ms | Catena / raw |")
        print("|---|---|---:|---:|---:|---:|")

        let workloads: [(name: String, run: (Variant) async throws -> Round)] = [
            ("\(settings.requests) sequential GET + decode", { try await runSequential($0, count: settings.requests) }),
            ("\(settings.requests) GET, \(settings.inFlight) in flight", { try await runConcurrent($0, count: settings.requests, inFlight: settings.inFlight) }),
        ]
        for workload in workloads {
            for pair in pairs {
                // Warm up connections and code paths.
                _ = try await runConcurrent(pair.raw, count: 200, inFlight: 8)
                _ = try await runConcurrent(pair.catena, count: 200, inFlight: 8)
                var raw: [Round] = []
                var catena: [Round] = []
                for round in 0..<settings.rounds {
                    if round.isMultiple(of: 2) {
                        raw.append(try await workload.run(pair.raw))
                        catena.append(try await workload.run(pair.catena))
                    } else {
                        catena.append(try await workload.run(pair.catena))
                        raw.append(try await workload.run(pair.raw))
                    }
                }
                let rawSummary = Summary(name: pair.raw.name, rounds: raw)
                let catenaSummary = Summary(name: pair.catena.name, rounds: catena)
                for summary in [rawSummary, catenaSummary] {
                    let ratio = summary.name == catenaSummary.name ? "**\(format(100 * catenaSummary.throughput / rawSummary.throughput, 1)) %**" : ""
                    print("| \(workload.name) | \(summary.name) | \(format(summary.throughput, 0)) | \(format(summary.p50.milliseconds, 3)) | \(format(summary.p99.milliseconds, 3)) | \(ratio) |")
                }
            }
        }
        try await rawClient.shutdown()
        try await ahcTransport.shutdown()
        rawSession.invalidateAndCancel()
        await server.stop()
    }
}

enum BenchmarkError: Error {
    case status(Int)
}
