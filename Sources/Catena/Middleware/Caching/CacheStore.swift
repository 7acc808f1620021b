import Foundation
import HTTPTypes

/// Entries by URL, least recently used first out.
final class CacheStore: Sendable {
    private struct State {
        var entries: [String: (entry: CacheEntry, used: UInt64)] = [:]
        var bytes = 0
        var clock: UInt64 = 0
        var statistics = CacheMiddleware.Statistics()
    }

    private let state = Locked(State())

    var statistics: CacheMiddleware.Statistics { state.withLock { $0.statistics } }
    var usage: (entries: Int, bytes: Int) { state.withLock { ($0.entries.count, $0.bytes) } }

    func count(_ counter: WritableKeyPath<CacheMiddleware.Statistics, Int>) {
        state.withLock { $0.statistics[keyPath: counter] += 1 }
    }

    func entry(for url: String, matching request: APIRequest) -> CacheEntry? {
        state.withLock { state in
            guard let found = state.entries[url], found.entry.matches(request) else { return nil }
            state.clock += 1
            state.entries[url]?.used = state.clock
            return found.entry
        }
    }

    func put(_ entry: CacheEntry, for url: String, limit: Int) {
        state.withLock { state in
            if let old = state.entries.removeValue(forKey: url) { state.bytes -= old.entry.cost }
            guard entry.cost <= limit else { return }
            state.clock += 1
            state.entries[url] = (entry, state.clock)
            state.bytes += entry.cost
            state.statistics.stored += 1
            // Least recently used out until it fits: a scan per eviction, fine for the
            // hundreds of entries an in-memory cache holds.
            while state.bytes > limit, let oldest = state.entries.min(by: { $0.value.used < $1.value.used }) {
                state.entries[oldest.key] = nil
                state.bytes -= oldest.value.entry.cost
                state.statistics.evicted += 1
            }
        }
    }

    /// Removes the entries of every identity for `address`.
    func removeAll(forAddress address: String) {
        let prefix = address + "\u{0}"
        state.withLock { state in
            for key in state.entries.keys where key.hasPrefix(prefix) {
                if let old = state.entries.removeValue(forKey: key) { state.bytes -= old.entry.cost }
            }
        }
    }

    func remove(_ url: String) {
        state.withLock { state in
            if let old = state.entries.removeValue(forKey: url) { state.bytes -= old.entry.cost }
        }
    }

    func removeAll() {
        state.withLock { state in
            state.entries = [:]
            state.bytes = 0
        }
    }
}
