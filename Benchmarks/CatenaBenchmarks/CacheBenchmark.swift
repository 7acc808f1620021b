import Catena
import CatenaAsyncHTTPClient
import Foundation
import HTTPTypes

/// 2,000 GETs of one URL through the chain with an `CacheMiddleware` and without it, in
/// interleaved rounds: a URL fresh for an hour (hits), and the users list, which says
/// `no-cache` (every GET is a conditional request answered with 304).
func cacheBenchmark(base: URL, rounds: Int) async throws {
    let count = 2_000
    let environment = ServerEnvironment(baseURL: base)!
    let transport = AsyncHTTPClientTransport()
    let plain = EnvironmentMiddleware(environment) --> transport
    print("| \(count) GETs of one URL (AsyncHTTPClient, \(rounds) interleaved rounds) | without cache, ms | with `CacheMiddleware`, ms | with / without |")
    print("|---|---:|---:|---:|")
    for (name, request) in [
        (
            "`max-age=3600` (fresh: answered from memory)",
            try APIRequest(.get, path: ["api", "cache", "bench"], query: [URLQueryItem(name: "max_age", value: "3600")])
        ),
        ("`no-cache` + ETag (each GET revalidated: 304)", try APIRequest(.get, path: ["api", "users", "2"])),
    ] {
        let cache = CacheMiddleware()
        let cached = EnvironmentMiddleware(environment) --> cache --> transport
        var without: [Double] = [], with: [Double] = []
        for _ in 0..<(rounds + 1) {
            var start = ContinuousClock.now
            for _ in 0..<count { _ = try await plain.load(request).validateStatus() }
            without.append((ContinuousClock.now - start).milliseconds)
            start = ContinuousClock.now
            for _ in 0..<count { _ = try await cached.load(request).validateStatus() }
            with.append((ContinuousClock.now - start).milliseconds)
        }
        without.removeFirst()
        with.removeFirst()
        let ratios = zip(with, without).map { $0 / $1 }
        print(
            "| \(name) | \(format(median(without), 1)) | \(format(median(with), 1)) | **\(format(median(ratios), 3)) ×** (\(format(ratios.min()!, 3))–\(format(ratios.max()!, 3))) |"
        )
        guard cache.statistics.fromCache >= count * rounds else { throw BenchmarkError.status(cache.statistics.fromCache) }
    }
    print()
}

/// Per call, p50 and p99: a network GET (no cache) against a memory hit and a disk hit of
/// the same URL (`max-age=3600`, a 2 KiB body), interleaved; then a cold start over a
/// directory of 10,000 entries and eviction under a byte bound, on an in-process origin
/// (the cache's own cost, with no network in it).
func cacheStoreBenchmark(base: URL, rounds: Int) async throws {
    let count = 2_000
    let environment = ServerEnvironment(baseURL: base)!
    let transport = AsyncHTTPClientTransport()
    let scratch = FileManager.default.temporaryDirectory.appending(path: "catena-bench-cache-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: scratch) }
    let request = try APIRequest(
        .get, path: ["api", "cache", "store-bench"], query: [.init(name: "max_age", value: "3600"), .init(name: "size", value: "2048")])
    let memory = CacheMiddleware()
    let disk = CacheMiddleware(directory: scratch.appending(path: "hits"))
    let chains: [(String, any HTTPLoader)] = [
        ("network (no cache)", EnvironmentMiddleware(environment) --> transport),
        ("memory hit", EnvironmentMiddleware(environment) --> memory --> transport),
        ("disk hit", EnvironmentMiddleware(environment) --> disk --> transport),
    ]
    var latencies = Array(repeating: [Duration](), count: chains.count)
    for round in 0..<(rounds + 1) {
        for (index, chain) in chains.enumerated() {
            for _ in 0..<count {
                let start = ContinuousClock.now
                _ = try await chain.1.load(request).validateStatus()
                if round > 0 { latencies[index].append(ContinuousClock.now - start) }
            }
        }
    }
    guard memory.statistics.hits >= count * rounds, disk.statistics.hits >= count * rounds else {
        throw BenchmarkError.status(disk.statistics.hits)
    }
    let network = percentile(latencies[0].sorted(), 0.5)
    print("| \(count) GETs × \(rounds) rounds, 2 KiB body (AsyncHTTPClient) | p50, µs | p99, µs | p50 / network |")
    print("|---|---:|---:|---:|")
    for (index, chain) in chains.enumerated() {
        let sorted = latencies[index].sorted()
        let p50 = percentile(sorted, 0.5)
        print(
            "| \(chain.0) | \(format(p50.milliseconds * 1000, 1)) | \(format(percentile(sorted, 0.99).milliseconds * 1000, 1)) | \(format(p50 / network, 3)) × |"
        )
    }
    print()

    // A directory of 10,000 entries, as an earlier run left it; then, in each round, a
    // new middleware's first answer (the index rebuilt from the files) and its hit.
    let full = scratch.appending(path: "full")
    let origin = InProcessOrigin(bodyBytes: 1024)
    let filler = EnvironmentMiddleware(environment) --> CacheMiddleware(maximumBytes: 1 << 30, directory: full) --> origin
    for index in 0..<10_000 { _ = try await filler.load(try APIRequest(.get, path: ["entry", String(index)])) }
    var cold: [Double] = [], warm: [Double] = []
    for _ in 0..<rounds {
        let cache = CacheMiddleware(maximumBytes: 1 << 30, directory: full)
        let chain = EnvironmentMiddleware(environment) --> cache --> origin
        var start = ContinuousClock.now
        _ = try await chain.load(try APIRequest(.get, path: ["entry", "5000"]))
        cold.append((ContinuousClock.now - start).milliseconds)
        start = ContinuousClock.now
        _ = try await chain.load(try APIRequest(.get, path: ["entry", "5001"]))
        warm.append((ContinuousClock.now - start).milliseconds)
        guard cache.statistics.hits == 2, cache.usage.entries == 10_000 else { throw BenchmarkError.status(cache.statistics.hits) }
    }
    print(
        "Cold start over 10,000 entries of 1 KiB (\(rounds) rounds, median): first answer \(format(median(cold), 1)) ms, the next \(format(median(warm), 3)) ms."
    )

    // Eviction: 5,000 new 4 KiB answers into a 1 MiB bound (about 230 fit), each store
    // evicting the least recently used; against the same calls with no cache.
    let uncached = EnvironmentMiddleware(environment) --> InProcessOrigin(bodyBytes: 4096)
    let start = ContinuousClock.now
    for index in 0..<5_000 { _ = try await uncached.load(try APIRequest(.get, path: ["evict", String(index)])) }
    print("Eviction: 5,000 calls with no cache, \(format((ContinuousClock.now - start).milliseconds * 1000 / 5_000, 1)) µs a call.")
    for (name, directory) in [("memory", nil), ("disk", Optional(scratch.appending(path: "evict")))] {
        let cache = CacheMiddleware(maximumBytes: 1 << 20, directory: directory)
        let chain = EnvironmentMiddleware(environment) --> cache --> InProcessOrigin(bodyBytes: 4096)
        let start = ContinuousClock.now
        for index in 0..<5_000 { _ = try await chain.load(try APIRequest(.get, path: ["evict", String(index)])) }
        let perStore = (ContinuousClock.now - start).milliseconds * 1000 / 5_000
        guard cache.usage.bytes <= 1 << 20, cache.statistics.evicted > 4_000 else { throw BenchmarkError.status(cache.statistics.evicted) }
        print(
            "Eviction, \(name): 5,000 stores into 1 MiB, \(format(perStore, 1)) µs a store with its evictions (\(cache.statistics.evicted) evicted, \(cache.usage.entries) kept)."
        )
    }
    print()
}

/// Answers every GET at once with `max-age=3600` and a body of `bodyBytes`.
private struct InProcessOrigin: HTTPLoader {
    let bodyBytes: Int
    func load(_ request: APIRequest) async throws(CatenaError) -> APIResponse {
        APIResponse(
            status: .ok, headerFields: [.cacheControl: "max-age=3600", .contentType: "application/octet-stream"],
            body: Data(repeating: 0x61, count: bodyBytes), request: request)
    }
}
