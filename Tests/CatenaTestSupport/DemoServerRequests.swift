import Catena
import Foundation
import Synchronization

/// Records every wait instead of sleeping.
final class VirtualClock: RetryClock {
    private let sleeps = Locked<[Duration]>([])
    /// The real time: only Retry-After dates read it, and they were made by the server
    /// from the real time (a frozen start would add the test's own duration to the wait).
    func now() -> Date { Date() }
    func sleep(for duration: Duration) async throws {
        try Task.checkCancellation()
        sleeps.withLock { $0.append(duration) }
    }
    var waits: [Duration] { sleeps.withLock { $0 } }
}

/// Counts the requests that pass it.
final class Counter: HTTPMiddleware {
    let count = Atomic<Int>(0)
    func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        count.add(1, ordering: .relaxed)
        return try await next.load(request)
    }
}

/// A client for the shared demo server.
func demoClient(_ kind: TransportKind = .asyncHTTPClient) async throws -> Client {
    Client(try await kind.chain())
}

/// Counts occurrences by name, from any task.
final class Tally: Sendable {
    private let counts = Locked<[String: Int]>([:])
    func add(_ name: String) { counts.withLock { $0[name, default: 0] += 1 } }
    var all: [String: Int] { counts.withLock { $0 } }
}

/// A unique key per test, so counters on the shared server never collide.
func uniqueKey(_ name: String = #function) -> String { "\(name)-\(UUID().uuidString)" }

struct InFlightStats: Decodable { let current: Int; let peak: Int; let total: Int }

func inFlightStats(_ key: String) async throws -> InFlightStats {
    try await TransportKind.asyncHTTPClient.chain()
        .load(try APIRequest(.get, path: ["api", "inflight", "stats"], query: [URLQueryItem(name: "key", value: key)]))
        .decode(InFlightStats.self)
}

func holdRequest(_ key: String, hold: Double = 0.2) throws -> APIRequest {
    try APIRequest(.get, path: ["api", "inflight"], query: [URLQueryItem(name: "key", value: key), URLQueryItem(name: "hold", value: String(hold))])
}
