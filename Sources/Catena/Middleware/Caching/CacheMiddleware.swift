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
/// - Given a `directory`, the entries are files there and outlive the process: the next
///   run of a command, or the next launch of an app, starts warm. One file an entry,
///   mode 0600 in a directory of mode 0700, named by hashes (no URL or credential in
///   clear); written whole or not at all, so a crash, a full disk or a damaged file
///   costs an entry (a miss), never a wrong answer. Processes may share the directory.
///
/// Put it early in the chain (after the environment, before retry and the transport),
/// so that a hit costs no network work:
///
/// ```swift
/// let cache = CacheMiddleware(maximumBytes: 20 << 20)
/// let chain = EnvironmentMiddleware(env) --> cache --> RetryMiddleware() --> AsyncHTTPClientTransport()
/// ```
public struct CacheMiddleware: HTTPMiddleware {
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
    /// Where the entries are kept as files; nil for memory.
    public let directory: URL?
    private let store: any CacheStore
    private let counters: CacheCounters
    private let now: @Sendable () -> Date

    /// A cache of at most `maximumBytes`, in memory, or in `directory` (made, mode 0700,
    /// when missing); `now` is the clock (tests pass their own).
    ///
    /// A directory that cannot be used (another user's, or not writable) costs misses,
    /// never a failed call. Files in it whose names do not end in `.entry` are left
    /// alone, except the cache's own: its `.key`, and half-written files a crash left.
    public init(maximumBytes: Int = 10 << 20, directory: URL? = nil, now: @escaping @Sendable () -> Date = { Date() }) {
        self.maximumBytes = max(0, maximumBytes)
        self.directory = directory
        let counters = CacheCounters()
        self.counters = counters
        if let directory {
            self.store = DiskCacheStore(directory: directory, maximumBytes: max(0, maximumBytes), counters: counters)
        } else {
            self.store = MemoryCacheStore(counters: counters)
        }
        self.now = now
    }

    /// What the cache has done so far.
    public var statistics: Statistics { counters.statistics }

    /// How many responses it holds, and their size in bytes.
    public var usage: (entries: Int, bytes: Int) { store.usage }

    /// Empties the cache, its directory's entries too (statistics stay).
    public func reset() async {
        store.removeAll()
    }

    public func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        try requireAbsolute(request, loader: "CacheMiddleware")
        // A download's body goes to a file, not through here: never answered from the
        // cache, never stored.
        guard request[option: DownloadDestination.self] == nil, let address = try? request.urlString() else {
            return try await next.load(request)
        }
        guard request.method == .get else {
            let response = try await next.load(request)
            if [.post, .put, .patch, .delete].contains(request.method), (200..<400).contains(response.status.code) {
                store.removeAll(forAddress: address)
            }
            return response
        }
        let directives = CacheControl(request.headerFields[.cacheControl])
        if directives.noStore { return try await next.load(request) }

        let entry = store.entry(for: address, matching: request)
        if let entry, !directives.noCache, directives.maxAge != 0, !entry.directives.noCache, entry.isFresh(at: now()) {
            counters.count(\.hits)
            request.report(.cache(.hit))
            return entry.response(to: request, at: now())
        }
        guard let entry, entry.hasValidator, !request.hasConditions else {
            counters.count(\.misses)
            request.report(.cache(.miss))
            let response = try await next.load(request)
            keep(response, for: request, sent: response.request, address: address)
            return response
        }
        let answer: APIResponse
        do {
            answer = try await next.load(entry.conditional(request))
        } catch {
            // A ValidationMiddleware below the cache does not know that a 304 answers the cache's
            // own question, and fails it: that 304 is still the answer.
            guard let response = error.response, response.status.code == 304 else { throw error }
            answer = response
        }
        guard answer.status.code == 304 else {
            counters.count(\.misses)
            request.report(.cache(.miss))
            let response = APIResponse(status: answer.status, headerFields: answer.headerFields, body: answer.body, request: request)
            keep(response, for: request, sent: answer.request, address: address)
            return response
        }
        let refreshed = entry.refreshed(by: answer, at: now())
        store.put(refreshed, for: address, request: request, limit: maximumBytes)
        counters.count(\.revalidated)
        request.report(.cache(.revalidated))
        return refreshed.response(to: request, at: now())
    }

    /// Streams pass through, neither answered from the cache nor stored (a body read
    /// as it comes is not kept); a successful unsafe request still drops the entries
    /// for its URL.
    public func stream(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> StreamedResponse {
        try requireAbsolute(request, loader: "CacheMiddleware")
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
    private func keep(_ response: APIResponse, for request: APIRequest, sent: APIRequest, address: String) {
        if sent.carriesCredentials, !CacheControl(response.headerFields[.cacheControl]).isPublic {
            store.remove(address, request: request)
            return
        }
        guard let entry = CacheEntry(response: response, request: request, receivedAt: now()) else {
            store.remove(address, request: request)
            return
        }
        store.put(entry, for: address, request: request, limit: maximumBytes)
    }
}
