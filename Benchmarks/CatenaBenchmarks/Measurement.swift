// Settings, rounds and the statistics every workload reports.

import Foundation

struct Settings {
    var requests = 2000
    var rounds = 15
    var inFlight = 64
    /// The sections to run; all by default.
    static let allSections: Set<String> = [
        "http", "https", "network", "operations", "cache", "soak", "stream", "observability", "openapi", "hostile", "health",
        "websocket", "connection",
    ]
    var sections = Self.allSections
    /// Calls per transport in the soak.
    var soakRequests = 100_000
    /// Only this row of the soak (each row is best measured in a process of its own).
    var soakRow: Int?
    /// The demo server in a process of its own (`--server-process`, with `--only http`, `stream` or `connection`):
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
                    "usage: CatenaBenchmarks [--requests N] [--rounds N] [--in-flight N] [--soak-requests N] [--soak-row 0-3] [--server-process] [--loops N] [--only http|https|network|operations|cache|soak|stream|observability|openapi|hostile|health|websocket|connection]"
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
