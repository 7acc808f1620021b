import Catena
import CatenaAsyncHTTPClient
import Foundation

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
