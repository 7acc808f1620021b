import AsyncHTTPClient
import Catena
import CatenaAsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOFoundationCompat
import NIOPosix

/// The highest resident memory seen while `body` runs, sampled every 20 ms.
func peakResident<T: Sendable>(_ body: () async throws -> T) async rethrows -> (T, Int) {
    let peak = Locked(residentBytes())
    let sampler = Task {
        while !Task.isCancelled {
            let now = residentBytes()
            peak.withLock { $0 = max($0, now) }
            try? await Task.sleep(for: .milliseconds(20))
        }
    }
    defer { sampler.cancel() }
    let value = try await body()
    return (value, peak.withLock { $0 })
}

/// Streaming through the chain against raw AsyncHTTPClient reading the same body:
/// 1 GiB of bytes, and server-sent events decoded with the same parser. Then 1,000
/// event streams held open at once through one chain. `serverInProcess` says whether
/// the process's CPU time and memory include the server's; `loops`, when given, is the
/// number of event loops of a group of the client's own for the 1 GiB and event rows
/// (with one, a call's delegate always runs on its connection's loop).
func streamBenchmark(base: URL, rounds: Int, serverInProcess: Bool, loops: Int?) async throws {
    let whose = serverInProcess ? "process, server included" : "client alone"
    let environment = ServerEnvironment(baseURL: base)!
    let group = loops.map { MultiThreadedEventLoopGroup(numberOfThreads: $0) }
    let client = HTTPClient(eventLoopGroup: group ?? .singletonMultiThreadedEventLoopGroup, configuration: AsyncHTTPClientTransport.defaultConfiguration)
    let clientLoops = loops.map { ", client on \($0) event loop\($0 == 1 ? "" : "s")" } ?? ""
    let chain =
        EnvironmentMiddleware(environment) --> LogMiddleware(logger: Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() })
        --> ThrottleMiddleware(maxInFlight: 64)
        --> AsyncHTTPClientTransport(client: client, decodesCompression: true)

    // 1 GiB of bytes.
    let size = 1 << 30
    let path = ["api", "file"]
    let query = [URLQueryItem(name: "size", value: String(size))]
    let rawURL = base.appending(path: "api/file").appending(queryItems: query).absoluteString
    let raw: @Sendable () async throws -> Int = {
        let response = try await client.execute(HTTPClientRequest(url: rawURL), timeout: .seconds(600))
        var count = 0
        for try await chunk in response.body { count += chunk.readableBytes }
        return count
    }
    let catena: @Sendable () async throws -> Int = {
        let response = try await chain.stream(try APIRequest(.get, path: path, query: query))
        var count = 0
        for try await chunk in response.body { count += chunk.count }
        return count
    }
    let baseline = residentBytes()
    let bytes = try await alternating(rounds: rounds, raw: raw, catena: catena) { run in
        let (count, peak) = try await peakResident(run)
        guard count == size else { throw BenchmarkError.status(count) }
        return (Double(size), peak)
    }
    print()
    print(
        "| 1 GiB streamed (AsyncHTTPClient, \(rounds) alternating rounds\(clientLoops)) | MB/s, median | CPU s per GiB (\(whose)), median "
            + "| peak resident MB (\(whose)) | Catena / raw |")
    print("|---|---:|---:|---:|---:|")
    print(
        "| raw `HTTPClient.execute`, body read chunk by chunk | \(format(median(bytes.raw) / 1e6, 0)) "
            + "| \(format(median(bytes.rawCPU) * Double(size), 2)) | \(format(Double(bytes.rawPeak) / 1e6, 0)) | |")
    print(
        "| `chain.stream` (environment, log, throttle, transport) | \(format(median(bytes.catena) / 1e6, 0)) "
            + "| \(format(median(bytes.catenaCPU) * Double(size), 2)) | \(format(Double(bytes.catenaPeak) / 1e6, 0)) "
            + "| \(bytes.ratioCell); CPU \(bytes.cpuRatioCell) |")
    print("| resident before the first round | | | \(format(Double(baseline) / 1e6, 0)) | |")

    // Server-sent events: 100,000 small events, decoded.
    let events = 100_000
    let eventQuery = [URLQueryItem(name: "count", value: String(events)), URLQueryItem(name: "interval", value: "0")]
    let eventURL = base.appending(path: "api/events").appending(queryItems: eventQuery).absoluteString
    let placeholder = try APIRequest(urlString: eventURL)
    let rawEvents: @Sendable () async throws -> Int = {
        let response = try await client.execute(HTTPClientRequest(url: eventURL), timeout: .seconds(600))
        var parser = ServerSentEventParser()
        var count = 0
        for try await chunk in response.body {
            let (decoded, error) = parser.read(Data(buffer: chunk, byteTransferStrategy: .noCopy), request: placeholder)
            if let error { throw error }
            count += decoded.count
        }
        return count
    }
    let catenaEvents: @Sendable () async throws -> Int = {
        var count = 0
        for try await _ in try await chain.stream(try APIRequest(.get, path: ["api", "events"], query: eventQuery)).serverSentEvents() { count += 1 }
        return count
    }
    let rates = try await alternating(rounds: rounds, raw: rawEvents, catena: catenaEvents) { run in
        guard try await run() == events else { throw BenchmarkError.status(-2) }
        return (Double(events), 0)
    }
    print()
    print(
        "| \(events) server-sent events (AsyncHTTPClient, \(rounds) alternating rounds\(clientLoops)) | events/s, median "
            + "| CPU µs per event (\(whose)), median | Catena / raw |")
    print("|---|---:|---:|---:|")
    print(
        "| raw `HTTPClient.execute` + Catena's event parser on each chunk (as Data, not copied) | \(format(median(rates.raw), 0)) | \(format(median(rates.rawCPU) * 1e6, 2)) | |"
    )
    print(
        "| `chain.stream(…).serverSentEvents()` | \(format(median(rates.catena), 0)) | \(format(median(rates.catenaCPU) * 1e6, 2)) "
            + "| \(rates.ratioCell); CPU \(rates.cpuRatioCell) |")

    try await client.shutdown()
    try await group?.shutdownGracefully()
    try await manyStreams(base: base, whose: serverInProcess ? "client and in-process server" : "client alone")
}

/// Per-second rates of raw and Catena runs, taken in alternating order round by round
/// (so drift in the machine's speed falls on both), with each side's peak memory.
struct AlternatingRates {
    var raw: [Double] = [], catena: [Double] = [], ratios: [Double] = []
    var rawPeak = 0, catenaPeak = 0
    /// Process CPU seconds per unit moved (an in-process server's included), each run's.
    var rawCPU: [Double] = [], catenaCPU: [Double] = []

    /// Catena's median CPU per unit over raw's: a figure the machine's noise moves less
    /// than the rates (a run that waits for the scheduler spends no CPU waiting).
    var cpuRatioCell: String { "\(format(median(catenaCPU) / median(rawCPU), 3)) ×" }

    /// The median ratio, bold, with the range over the rounds.
    var ratioCell: String {
        "**\(format(median(ratios), 3)) ×** (\(format(ratios.min()!, 2))–\(format(ratios.max()!, 2)))"
    }
}

/// Runs `raw` and `catena` `rounds` times each, alternating which goes first; `measure`
/// runs one and returns the units it moved and the peak resident memory it saw.
func alternating(
    rounds: Int, raw: @escaping @Sendable () async throws -> Int, catena: @escaping @Sendable () async throws -> Int,
    measure: (@Sendable () async throws -> Int) async throws -> (units: Double, peak: Int)
) async throws -> AlternatingRates {
    var result = AlternatingRates()
    for round in 0..<rounds {
        var rates: [String: Double] = [:]
        for (name, run) in round % 2 == 0 ? [("raw", raw), ("catena", catena)] : [("catena", catena), ("raw", raw)] {
            let start = ContinuousClock.now
            let cpuStart = processCPUTime()
            let (units, peak) = try await measure(run)
            rates[name] = units / (ContinuousClock.now - start).seconds
            let cpu = (processCPUTime() - cpuStart).seconds / units
            if name == "raw" {
                result.rawPeak = max(result.rawPeak, peak)
                result.rawCPU.append(cpu)
            } else {
                result.catenaPeak = max(result.catenaPeak, peak)
                result.catenaCPU.append(cpu)
            }
        }
        result.raw.append(rates["raw"]!)
        result.catena.append(rates["catena"]!)
        result.ratios.append(rates["catena"]! / rates["raw"]!)
    }
    return result
}

/// 1,000 event streams open at once through one chain, each sending its first event
/// after 3 s and its second 3 s later: resident memory per open, idle stream.
func manyStreams(base: URL, whose: String) async throws {
    let streams = 1_000
    var configuration = AsyncHTTPClientTransport.defaultConfiguration
    configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = streams
    let transport = AsyncHTTPClientTransport(configuration: configuration, timeout: .seconds(60))
    let chain = EnvironmentMiddleware(ServerEnvironment(baseURL: base)!) --> transport
    let request = try APIRequest(
        .get, path: ["api", "events"],
        query: [
            URLQueryItem(name: "count", value: "2"), URLQueryItem(name: "interval", value: "3"),
        ])
    let before = residentBytes()
    let opened = Locked(0)
    let start = ContinuousClock.now
    let (delivered, idle) = try await withThrowingTaskGroup(of: Int.self) { group -> (Int, Int) in
        for _ in 0..<streams {
            group.addTask {
                let response = try await chain.stream(request)
                opened.withLock { $0 += 1 }
                var count = 0
                for try await _ in response.serverSentEvents() { count += 1 }
                return count
            }
        }
        // Every head is in and no event has come yet: the streams are idle.
        while opened.withLock({ $0 }) < streams, ContinuousClock.now - start < .seconds(2.5) {
            try await Task.sleep(for: .milliseconds(20))
        }
        let idle = residentBytes()
        var delivered = 0
        for try await count in group { delivered += count }
        return (delivered, idle)
    }
    try await transport.shutdown()
    let open = opened.withLock { $0 }
    print()
    print("| \(streams) event streams open at once (AsyncHTTPClient, one chain) | value |")
    print("|---|---:|")
    print("| streams open before the first event | \(open) |")
    print("| events delivered (2 per stream) | \(delivered) of \(streams * 2) |")
    print("| resident memory per open idle stream (\(whose)) | **\(format(Double(idle - before) / Double(streams) / 1024, 1)) KB** |")
}
