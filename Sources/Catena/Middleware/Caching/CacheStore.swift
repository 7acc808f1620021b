import Foundation
import HTTPTypes

/// Where a ``CacheMiddleware`` keeps its entries: in memory, or in a directory.
protocol CacheStore: Sendable {
    /// The entry stored for `address` and `request`'s identity, when `request` matches
    /// its `Vary`; counts as a use.
    func entry(for address: String, matching request: APIRequest) -> CacheEntry?
    /// Stores `entry`, replacing what was there, then evicts the least recently used
    /// until the store is within `limit` bytes (an entry larger than that is not kept).
    func put(_ entry: CacheEntry, for address: String, request: APIRequest, limit: Int)
    /// Removes the entry for `address` and `request`'s identity.
    func remove(_ address: String, request: APIRequest)
    /// Removes the entries of every identity for `address`.
    func removeAll(forAddress address: String)
    func removeAll()
    var usage: (entries: Int, bytes: Int) { get }
}

/// What a cache has done; shared by the middleware and its store.
final class CacheCounters: Sendable {
    private let state = Locked(CacheMiddleware.Statistics())
    var statistics: CacheMiddleware.Statistics { state.withLock { $0 } }
    func count(_ counter: WritableKeyPath<CacheMiddleware.Statistics, Int>, by amount: Int = 1) {
        state.withLock { $0[keyPath: counter] += amount }
    }
}

/// Entries by URL and identity, in memory, least recently used first out.
final class MemoryCacheStore: CacheStore {
    private struct State {
        var entries: [String: (entry: CacheEntry, used: UInt64)] = [:]
        var bytes = 0
        var clock: UInt64 = 0
    }

    private let state = Locked(State())
    private let counters: CacheCounters

    init(counters: CacheCounters) {
        self.counters = counters
    }

    var usage: (entries: Int, bytes: Int) { state.withLock { ($0.entries.count, $0.bytes) } }

    /// Keyed by who asks, too: one identity's answers never reach another.
    private static func key(_ address: String, _ request: APIRequest) -> String { address + "\u{0}" + request.identityFingerprint }

    func entry(for address: String, matching request: APIRequest) -> CacheEntry? {
        let key = Self.key(address, request)
        return state.withLock { state in
            guard let found = state.entries[key], found.entry.matches(request) else { return nil }
            state.clock += 1
            state.entries[key]?.used = state.clock
            return found.entry
        }
    }

    func put(_ entry: CacheEntry, for address: String, request: APIRequest, limit: Int) {
        let key = Self.key(address, request)
        let evicted = state.withLock { state in
            if let old = state.entries.removeValue(forKey: key) { state.bytes -= old.entry.cost }
            guard entry.cost <= limit else { return -1 }
            state.clock += 1
            state.entries[key] = (entry, state.clock)
            state.bytes += entry.cost
            var evicted = 0
            // Least recently used out until it fits: a scan per eviction, fine for the
            // hundreds of entries an in-memory cache holds.
            while state.bytes > limit, let oldest = state.entries.min(by: { $0.value.used < $1.value.used }) {
                state.entries[oldest.key] = nil
                state.bytes -= oldest.value.entry.cost
                evicted += 1
            }
            return evicted
        }
        guard evicted >= 0 else { return }
        counters.count(\.stored)
        if evicted > 0 { counters.count(\.evicted, by: evicted) }
    }

    func removeAll(forAddress address: String) {
        let prefix = address + "\u{0}"
        state.withLock { state in
            for key in state.entries.keys where key.hasPrefix(prefix) {
                if let old = state.entries.removeValue(forKey: key) { state.bytes -= old.entry.cost }
            }
        }
    }

    func remove(_ address: String, request: APIRequest) {
        let key = Self.key(address, request)
        state.withLock { state in
            if let old = state.entries.removeValue(forKey: key) { state.bytes -= old.entry.cost }
        }
    }

    func removeAll() {
        state.withLock { state in
            state.entries = [:]
            state.bytes = 0
        }
    }
}
