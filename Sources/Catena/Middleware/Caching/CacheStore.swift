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
        var entries: [String: CacheEntry] = [:]
        var bytes = 0
        var order = RecencyOrder()
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
            guard let found = state.entries[key], found.matches(request) else { return nil }
            state.order.touch(key)
            return found
        }
    }

    func put(_ entry: CacheEntry, for address: String, request: APIRequest, limit: Int) {
        let key = Self.key(address, request)
        let evicted = state.withLock { state in
            if let old = state.entries.removeValue(forKey: key) { state.bytes -= old.cost }
            guard entry.cost <= limit else {
                state.order.remove(key)
                return -1
            }
            state.order.touch(key)
            state.entries[key] = entry
            state.bytes += entry.cost
            var evicted = 0
            // Least recently used out until it fits (the new entry, newest, is last).
            while state.bytes > limit, let oldest = state.order.popOldest() {
                if let old = state.entries.removeValue(forKey: oldest) { state.bytes -= old.cost }
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
                if let old = state.entries.removeValue(forKey: key) { state.bytes -= old.cost }
                state.order.remove(key)
            }
        }
    }

    func remove(_ address: String, request: APIRequest) {
        let key = Self.key(address, request)
        state.withLock { state in
            if let old = state.entries.removeValue(forKey: key) { state.bytes -= old.cost }
            state.order.remove(key)
        }
    }

    func removeAll() {
        state.withLock { state in
            state.entries = [:]
            state.bytes = 0
            state.order = RecencyOrder()
        }
    }
}

/// Keys in the order they were last used, for least-recently-used eviction at an
/// amortised constant cost: a use appends a record, a pop skips the records a later use
/// or a removal left stale, and the log is rebuilt when it holds over twice the keys.
/// A scan or a sort per eviction would grow with the entries a store holds.
struct RecencyOrder {
    private var log: [(key: String, stamp: UInt64)] = []
    private var head = 0
    private var stamps: [String: UInt64] = [:]
    private var clock: UInt64 = 0

    /// `key` becomes the most recently used.
    mutating func touch(_ key: String) {
        clock += 1
        stamps[key] = clock
        log.append((key, clock))
        if log.count > 2 * stamps.count + 64 {
            log = log[head...].filter { stamps[$0.key] == $0.stamp }
            head = 0
        }
    }

    mutating func remove(_ key: String) {
        stamps[key] = nil
    }

    /// The least recently used key, taken out of the order; nil when it is empty.
    mutating func popOldest() -> String? {
        while head < log.count {
            let record = log[head]
            head += 1
            if stamps[record.key] == record.stamp {
                stamps[record.key] = nil
                return record.key
            }
        }
        return nil
    }
}
