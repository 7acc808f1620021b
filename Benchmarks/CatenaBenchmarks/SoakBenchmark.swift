import Catena
import CatenaAsyncHTTPClient
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Logging

/// Resident memory of this process, in bytes (Linux: /proc/self/statm).
func residentBytes() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let fields = text.split(separator: " ")
    guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}

/// `requests` calls through the full stack (environment, log, de-duplication, throttle,
/// retry, validation, token auth, HTTP cache) on each transport, 16 at a time, mixing a
/// cached user (revalidated with ETags), a list page and a token-protected resource.
/// Resident memory is sampled every 10,000 calls; growth is counted from the first
/// sample (the warm-up), so it shows what the stack keeps, not what it needs to start.
///
/// Rows run one after another share the allocator's freed pages, which flatters the
/// later rows: `row` runs just one, for a process of its own.
func soakBenchmark(base: URL, requests: Int, row: Int?) async throws {
    let environment = ServerEnvironment(baseURL: base)!
    let quiet = Logger(label: "soak") { _ in SwiftLogNoOpLogHandler() }
    let paths: [[String]] = [["api", "users", "2"], ["api", "users"], ["api", "protected", "me"]]
    print("| \(requests) calls, 16 in flight | calls/s | RSS after 10,000, MB | RSS max, MB | RSS at the end, MB | growth after warm-up, MB |")
    print("|---|---:|---:|---:|---:|---:|")
    var rows: [(String, @Sendable (Int) async throws -> Void)] = []
    for (name, transport) in [("AsyncHTTPClient", AsyncHTTPClientTransport() as any HTTPLoader), ("URLSession", URLSessionTransport())] {
        let oauth = OAuth2Client(
            clientID: "catena-service", authentication: .clientSecretBasic("catena-service-secret"),
            endpoints: .init(token: base.appending(path: "oauth/token")), loader: transport)
        let chain =
            EnvironmentMiddleware(environment) --> LogMiddleware(logger: quiet) --> DeduplicationMiddleware() --> ThrottleMiddleware(maxInFlight: 64)
            --> RetryMiddleware() --> ValidationMiddleware()
            --> TokenAuthMiddleware(hosts: ["127.0.0.1:\(base.port ?? 80)"], client: oauth, signIn: .clientCredentials())
            --> CacheMiddleware() --> transport
        rows.append(("\(name), full stack", { index in _ = try await chain.load(try APIRequest(.get, path: paths[index % paths.count])) }))
    }
    // What the transport and URLSession itself keep, for comparison.
    let alone = EnvironmentMiddleware(environment) --> URLSessionTransport()
    rows.append(("URLSessionTransport alone (users/2)", { _ in _ = try await alone.load(try APIRequest(.get, path: ["api", "users", "2"])) }))
    let rawSession = URLSession(configuration: URLSessionTransport.defaultConfiguration)
    let rawURL = base.appending(path: "api/users/2")
    rows.append(("raw URLSession `data(for:)` (users/2)", { _ in _ = try await rawSession.data(for: URLRequest(url: rawURL)) }))
    for (index, (name, call)) in rows.enumerated() where row == nil || row == index {
        var samples: [Int] = []
        let start = ContinuousClock.now
        var sent = 0
        while sent < requests {
            let batch = min(10_000, requests - sent)
            let offset = sent
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<batch {
                    if index >= 16 { try await group.next() }
                    group.addTask { try await call(offset + index) }
                }
                try await group.waitForAll()
            }
            sent += batch
            samples.append(residentBytes())
        }
        let elapsed = ContinuousClock.now - start
        let megabytes = { (bytes: Int) in format(Double(bytes) / 1_048_576, 1) }
        let warm = samples.first ?? 0
        let growth = (samples.max() ?? 0) - warm
        print(
            "| \(name) | \(format(Double(requests) / elapsed.seconds, 0)) | \(megabytes(warm)) | \(megabytes(samples.max() ?? 0)) | \(megabytes(samples.last ?? 0)) | **\(megabytes(growth))** |"
        )
        print("<!-- \(name) RSS samples, MB: \(samples.map(megabytes).joined(separator: " ")) -->")
    }
    print()
}
