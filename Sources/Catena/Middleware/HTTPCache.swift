public import Foundation
import HTTPTypes

/// An in-memory HTTP cache for GET responses, bounded in size, that follows what the
/// server says (RFC 9111, as a private cache):
///
/// - A response is stored only if it may be: status 200, 203, 204, 300, 301, 308, 404,
///   410; no `no-store` on the request or the response; not `Vary: *`; and with either
///   a freshness lifetime (`max-age`, or `Expires` after `Date`) or a validator (`ETag`,
///   `Last-Modified`). A response to a request that carried credentials
///   (`Authorization`, `Cookie`, `Proxy-Authorization`) is stored only if it says
///   `public`.
/// - A fresh entry answers at once. A stale one, or one marked `no-cache` (by the
///   response, or by the request with `no-cache` / `max-age=0`), is revalidated with
///   `If-None-Match` / `If-Modified-Since`; a 304 refreshes the entry and returns it.
/// - A successful POST, PUT, PATCH or DELETE drops the entry for its URL.
/// - When the stored bodies and header fields pass ``maximumBytes``, the least
///   recently used entries go.
///
/// Put it early in the chain (after the environment, before retry and the transport),
/// so that a hit costs no network work:
///
/// ```swift
/// let cache = HTTPCache(maximumBytes: 20 << 20)
/// let chain = ApplyEnvironment(env) --> cache --> Retry() --> AsyncHTTPClientTransport()
/// ```
public struct HTTPCache: HTTPMiddleware {
    /// How the cache answered so far.
    public struct Statistics: Sendable, Equatable {
        /// Fresh entries returned without a request.
        public var hits = 0
        /// Stale entries the server confirmed with 304.
        public var revalidated = 0
        /// Requests sent on without a usable entry (or whose entry the server replaced).
        public var misses = 0
        /// Responses stored.
        public var stored = 0
        /// Entries dropped to stay within the size bound.
        public var evicted = 0

        /// Responses that came from the cache: hits plus revalidations.
        public var fromCache: Int { hits + revalidated }
    }

    /// The most bytes (bodies and header fields) the cache keeps.
    public let maximumBytes: Int
    private let store: CacheStore
    private let now: @Sendable () -> Date

    /// A cache of at most `maximumBytes`; `now` is the clock (tests pass their own).
    public init(maximumBytes: Int = 10 << 20, now: @escaping @Sendable () -> Date = { Date() }) {
        self.maximumBytes = max(0, maximumBytes)
        self.store = CacheStore()
        self.now = now
    }

    /// What the cache has done so far.
    public var statistics: Statistics { store.statistics }

    /// How many responses it holds, and their size in bytes.
    public var usage: (entries: Int, bytes: Int) { store.usage }

    /// Empties the cache (statistics stay).
    public func reset() async {
        store.removeAll()
    }

    public func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        try requireAbsolute(request, loader: "HTTPCache")
        // A download's body goes to a file, not through here: never answered from the
        // cache, never stored.
        guard request[option: DownloadDestination.self] == nil, let address = try? request.urlString() else {
            return try await next.load(request)
        }
        // Keyed by who asks, too: one identity's answers never reach another.
        let url = address + "\u{0}" + request.identityFingerprint
        guard request.method == .get else {
            let response = try await next.load(request)
            if [.post, .put, .patch, .delete].contains(request.method), (200..<400).contains(response.status.code) {
                store.removeAll(forAddress: address)
            }
            return response
        }
        let directives = CacheControl(request.headerFields[.cacheControl])
        if directives.noStore { return try await next.load(request) }

        let entry = store.entry(for: url, matching: request)
        if let entry, !directives.noCache, directives.maxAge != 0, !entry.directives.noCache, entry.isFresh(at: now()) {
            store.count(\.hits)
            request.report(.cache(.hit))
            return entry.response(to: request, at: now())
        }
        guard let entry, entry.hasValidator, !request.hasConditions else {
            store.count(\.misses)
            request.report(.cache(.miss))
            let response = try await next.load(request)
            keep(response, for: request, sent: response.request, url: url)
            return response
        }
        let answer: APIResponse
        do {
            answer = try await next.load(entry.conditional(request))
        } catch {
            // A Validate below the cache does not know that a 304 answers the cache's
            // own question, and fails it: that 304 is still the answer.
            guard let response = error.response, response.status.code == 304 else { throw error }
            answer = response
        }
        guard answer.status.code == 304 else {
            store.count(\.misses)
            request.report(.cache(.miss))
            let response = APIResponse(status: answer.status, headerFields: answer.headerFields, body: answer.body, request: request)
            keep(response, for: request, sent: answer.request, url: url)
            return response
        }
        let refreshed = entry.refreshed(by: answer, at: now())
        store.put(refreshed, for: url, limit: maximumBytes)
        store.count(\.revalidated)
        request.report(.cache(.revalidated))
        return refreshed.response(to: request, at: now())
    }

    /// Streams pass through, neither answered from the cache nor stored (a body read
    /// as it comes is not kept); a successful unsafe request still drops the entries
    /// for its URL.
    public func stream(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> StreamedResponse {
        try requireAbsolute(request, loader: "HTTPCache")
        let streamed = try await next.stream(request)
        if [.post, .put, .patch, .delete].contains(request.method), (200..<400).contains(streamed.status.code),
            let address = try? request.urlString()
        {
            store.removeAll(forAddress: address)
        }
        return streamed
    }

    /// Stores `response` unless HTTP forbids it. `sent` is the request as the loaders
    /// below sent it: placed above an auth loader, the cache sees no credentials in
    /// `request`, but the answer was still for one identity and stays private.
    private func keep(_ response: APIResponse, for request: APIRequest, sent: APIRequest, url: String) {
        if sent.carriesCredentials, !CacheControl(response.headerFields[.cacheControl]).isPublic {
            store.remove(url)
            return
        }
        guard let entry = CacheEntry(response: response, request: request, receivedAt: now()) else {
            store.remove(url)
            return
        }
        store.put(entry, for: url, limit: maximumBytes)
    }
}

// MARK: Cache-Control

/// The directives of a `Cache-Control` field that a private cache acts on.
struct CacheControl: Sendable, Equatable {
    var maxAge: Int?
    var noStore = false
    var noCache = false
    var isPublic = false

    init(_ value: String?) {
        guard let value else { return }
        for part in value.split(separator: ",") {
            // Empty pieces ("=", "no-cache,=") are kept, so there is always a name.
            let pieces = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let first = pieces.first else { continue }
            let name = first.trimmingCharacters(in: .whitespaces).lowercased()
            let argument = pieces.count > 1 ? pieces[1].trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "\"")) : nil
            switch name {
            case "max-age": maxAge = argument.map(Self.deltaSeconds) ?? 0
            case "no-store": noStore = true
            case "no-cache": noCache = true
            case "public": isPublic = true
            default: break
            }
        }
    }

    /// The largest delta-seconds a cache must accept (RFC 9111, section 1.2.2: 2^31).
    static let maximumDeltaSeconds = 2_147_483_648

    /// delta-seconds: digits only; larger than 2^31 means 2^31; anything else is 0
    /// (a malformed `max-age` makes the response stale, as RFC 9111 asks).
    static func deltaSeconds<Text: StringProtocol>(_ text: Text) -> Int {
        guard !text.isEmpty, text.utf8.allSatisfy({ (48...57).contains($0) }) else { return 0 }
        return Int(text).map { min($0, maximumDeltaSeconds) } ?? maximumDeltaSeconds
    }
}

// MARK: Entries

/// A stored response.
struct CacheEntry: Sendable {
    let status: HTTPResponse.Status
    let headerFields: HTTPFields
    let body: Data
    let receivedAt: Date
    /// Request header values named by the response's `Vary`.
    let varying: [HTTPField.Name: String]
    let directives: CacheControl
    /// How long the response stays fresh, in seconds.
    let lifetime: TimeInterval

    static let cacheableStatuses: Set<Int> = [200, 203, 204, 300, 301, 308, 404, 410]

    /// The entry for `response`, or nil when HTTP says it may not be stored.
    init?(response: APIResponse, request: APIRequest, receivedAt: Date) {
        let directives = CacheControl(response.headerFields[.cacheControl])
        guard Self.cacheableStatuses.contains(response.status.code), !directives.noStore,
            !CacheControl(request.headerFields[.cacheControl]).noStore
        else { return nil }
        if request.carriesCredentials, !directives.isPublic { return nil }
        var varying: [HTTPField.Name: String] = [:]
        for name in (response.headerFields[.vary] ?? "").split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !name.isEmpty {
            guard name != "*", let field = HTTPField.Name(name) else { return nil }
            varying[field] = request.headerFields[field] ?? ""
        }
        self.status = response.status
        self.headerFields = response.headerFields
        self.body = response.body
        self.receivedAt = receivedAt
        self.varying = varying
        self.directives = directives
        self.lifetime = Self.lifetime(of: response.headerFields, directives: directives, receivedAt: receivedAt)
        guard lifetime > 0 || hasValidator else { return nil }
    }

    private init(copying entry: CacheEntry, headerFields: HTTPFields, receivedAt: Date) {
        status = entry.status
        self.headerFields = headerFields
        body = entry.body
        self.receivedAt = receivedAt
        varying = entry.varying
        directives = CacheControl(headerFields[.cacheControl])
        lifetime = Self.lifetime(of: headerFields, directives: directives, receivedAt: receivedAt)
    }

    /// The body and header fields, roughly, in bytes.
    var cost: Int { body.count + headerFields.reduce(0) { $0 + $1.name.rawName.utf8.count + $1.value.utf8.count + 4 } }

    var hasValidator: Bool { headerFields[.eTag] != nil || headerFields[.lastModified] != nil }

    /// How long the response stays fresh, in seconds: `max-age`, else `Expires` - `Date`.
    /// Worked out once per stored response (dates are costly to parse), not per lookup.
    static func lifetime(of fields: HTTPFields, directives: CacheControl, receivedAt: Date) -> TimeInterval {
        if let maxAge = directives.maxAge { return TimeInterval(maxAge) }
        if let expires = fields[.expires] {
            guard let expiry = HTTPDate.parse(expires) else { return 0 }  // an invalid Expires means "already expired"
            let date = fields[.date].flatMap(HTTPDate.parse) ?? receivedAt
            return max(0, expiry.timeIntervalSince(date))
        }
        return 0
    }

    /// The response's age at `now`: its `Age` when received plus the time since.
    func age(at now: Date) -> TimeInterval {
        // Age is delta-seconds: "1e19", "inf", "-5" or "nan" count as 0, huge as 2^31.
        let initial = headerFields[.age].map { CacheControl.deltaSeconds($0.trimmingCharacters(in: .whitespaces)) } ?? 0
        return TimeInterval(initial) + max(0, now.timeIntervalSince(receivedAt))
    }

    func isFresh(at now: Date) -> Bool { age(at: now) < lifetime }

    func matches(_ request: APIRequest) -> Bool {
        varying.allSatisfy { name, value in (request.headerFields[name] ?? "") == value }
    }

    /// `request` asking the server whether this entry is still current.
    func conditional(_ request: APIRequest) -> APIRequest {
        var request = request
        if let tag = headerFields[.eTag] { request.headerFields[.ifNoneMatch] = tag }
        if let modified = headerFields[.lastModified] { request.headerFields[.ifModifiedSince] = modified }
        return request
    }

    /// This entry with the header fields of a 304 that confirmed it (RFC 9111 §4.3.4).
    func refreshed(by notModified: APIResponse, at now: Date) -> CacheEntry {
        var fields = headerFields
        for field in notModified.headerFields where field.name != .contentLength {
            fields[field.name] = field.value
        }
        if notModified.headerFields[.age] == nil { fields[.age] = nil }
        return CacheEntry(copying: self, headerFields: fields, receivedAt: now)
    }

    /// The stored response, as the answer to `request`, with its current `Age`.
    func response(to request: APIRequest, at now: Date) -> APIResponse {
        var fields = headerFields
        let age = age(at: now)
        fields[.age] = String(age.isFinite ? Int(min(age, TimeInterval(CacheControl.maximumDeltaSeconds))) : CacheControl.maximumDeltaSeconds)
        return APIResponse(status: status, headerFields: fields, body: body, request: request)
    }
}

extension APIRequest {
    /// Whether the caller asked a conditional question of its own.
    var hasConditions: Bool {
        headerFields[.ifNoneMatch] != nil || headerFields[.ifModifiedSince] != nil
    }
}

// MARK: Store

/// Entries by URL, least recently used first out.
final class CacheStore: Sendable {
    private struct State {
        var entries: [String: (entry: CacheEntry, used: UInt64)] = [:]
        var bytes = 0
        var clock: UInt64 = 0
        var statistics = HTTPCache.Statistics()
    }

    private let state = Locked(State())

    var statistics: HTTPCache.Statistics { state.withLock { $0.statistics } }
    var usage: (entries: Int, bytes: Int) { state.withLock { ($0.entries.count, $0.bytes) } }

    func count(_ counter: WritableKeyPath<HTTPCache.Statistics, Int>) {
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
