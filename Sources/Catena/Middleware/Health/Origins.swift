import Foundation

extension APIRequest {
    /// `scheme://host:port`, the port always written out and the host lowercased: the
    /// key under which the health middleware (rate limits, retry budgets, circuit
    /// breakers, hedging) keep an origin's state.
    package var originKey: String {
        let scheme = (self.scheme ?? "").lowercased()
        let port = port ?? (scheme == "https" ? 443 : scheme == "http" ? 80 : 0)
        return "\(scheme)://\((host ?? "").lowercased()):\(port)"
    }

    /// `host:port` for messages: the origin without its scheme.
    package var originName: String {
        let key = originKey
        guard let range = key.range(of: "://") else { return key }
        return String(key[range.upperBound...])
    }
}

/// State kept per origin, in a table that cannot grow without bound: redirects and
/// absolute URLs let a server choose origins.
package protocol OriginState: Sendable {
    /// Whether the entry may be dropped: nothing waits on it. A dropped origin starts
    /// afresh, as if never seen.
    var isIdle: Bool { get }
}

/// Per-origin states behind one lock. Past `capacity` origins the least recently used
/// idle one is dropped; busy ones are kept, so the table outgrows `capacity` only by
/// origins with calls waiting.
package final class OriginTable<State: OriginState>: Sendable {
    private struct Entry {
        var state: State
        var used: UInt64
    }

    private struct Table {
        var entries: [String: Entry] = [:]
        var tick: UInt64 = 0
    }

    private let table = Locked(Table())
    private let capacity: Int
    private let make: @Sendable () -> State

    package init(capacity: Int = 1024, make: @escaping @Sendable () -> State) {
        self.capacity = max(1, capacity)
        self.make = make
    }

    /// Runs `body` on `key`'s state, made on first use, under the table's lock.
    package func withState<T>(_ key: String, _ body: (inout State) -> T) -> T {
        table.withLock { table in
            table.tick &+= 1
            var entry = table.entries.removeValue(forKey: key) ?? Entry(state: make(), used: 0)
            entry.used = table.tick
            let result = body(&entry.state)
            table.entries[key] = entry
            if table.entries.count > capacity {
                let idle = table.entries.filter { $0.key != key && $0.value.state.isIdle }
                if let oldest = idle.min(by: { $0.value.used < $1.value.used }) { table.entries[oldest.key] = nil }
            }
            return result
        }
    }

    /// Runs `body` on every state; for `reset()`.
    package func forEach(_ body: (inout State) -> Void) {
        table.withLock { table in
            for key in Array(table.entries.keys) { body(&table.entries[key]!.state) }
        }
    }
}

extension Result where Success == APIResponse, Failure == CatenaError {
    /// The origin's answer to a call: the response returned, or the one an error
    /// carries (a ``ValidationMiddleware`` below turns a 429 or 503 into an error that
    /// holds it). The health middleware read an answer wherever it comes.
    package var answer: APIResponse? {
        switch self {
        case .success(let response): response
        case .failure(let error): error.response
        }
    }
}

extension APIResponse {
    /// The key of the origin that answered: after a redirect the transport followed, the
    /// last hop's (a CDN's 429 holds the CDN, not the API that redirected to it).
    package var answeringOriginKey: String { request.originKey }
}
