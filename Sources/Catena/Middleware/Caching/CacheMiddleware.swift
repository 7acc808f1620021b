public import Foundation
import HTTPTypes

/// An HTTP cache for GET responses, in memory or in a directory, bounded in size, that
/// follows what the server says (RFC 9111, as a private cache):
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
/// - Freshness counts the response's age from its `Age` and its `Date`, and the
///   request's `max-age`, `min-fresh`, `max-stale`, `no-cache` and `only-if-cached`.
///   A response with neither `max-age` nor `Expires` but a `Last-Modified` stays fresh
///   for a tenth of the time it had not changed, at most a day (RFC 9111, 4.2.2).
/// - `Vary` compares the named request fields with their whitespace (and, for the
///   `Accept` fields, case) normalised; `Vary: *` is never stored.
/// - A stale entry answers at once within the response's `stale-while-revalidate`
///   (RFC 5861), while one revalidation per entry runs in the background; within
///   `stale-if-error`, it answers when the origin fails (a 500, 502, 503 or 504, or
///   no answer). Never where `must-revalidate` or `no-cache` forbid it.
/// - ``CacheOffline`` answers from the cache whatever an entry's age, without the
///   network; with nothing usable, as `only-if-cached` does: 504 Gateway Timeout.
/// - A successful POST, PUT, PATCH or DELETE drops the entries for its URL, and for
///   its answer's `Location` and `Content-Location` on the same origin. A HEAD's 200
///   refreshes the stored GET when a validator and its length agree, else drops it.
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
        /// Stale entries answered without the network, as a directive or ``CacheOffline`` allowed.
        public var stale = 0
        /// Stale entries answered because the origin failed (`stale-if-error`).
        public var staleIfError = 0
        /// Requests that could not go to the network and found nothing usable: answered 504.
        public var unavailable = 0

        /// Responses that came from the cache: hits, revalidations and stale answers.
        public var fromCache: Int { hits + revalidated + stale + staleIfError }
    }

    /// The most bytes (bodies and header fields) the cache keeps.
    public let maximumBytes: Int
    /// Where the entries are kept as files; nil for memory.
    public let directory: URL?
    private let store: any CacheStore
    private let counters: CacheCounters
    /// Background revalidations (stale-while-revalidate) by entry, one at a time each.
    private let refreshing = Locked(Refreshing())

    private struct Refreshing {
        var started: UInt64 = 0
        var tasks: [String: (id: UInt64, task: Task<Void, Never>)] = [:]
    }
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
        let running = refreshing.withLock { state in
            defer { state.tasks = [:] }
            return state.tasks.values.map(\.task)
        }
        // Waited for: a refresh that had its answer before the cancel stores nothing after.
        for task in running { task.cancel() }
        for task in running { await task.value }
        store.removeAll()
    }

    public func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        try requireAbsolute(request, loader: "CacheMiddleware")
        // A download's body goes to a file, not through here: never answered from the
        // cache, never stored.
        let asked = CacheControl(request.headerFields[.cacheControl])
        let offline = request[option: CacheOffline.self]
        let localOnly = offline || asked.onlyIfCached
        guard request[option: DownloadDestination.self] == nil, let address = try? request.urlString() else {
            // Not the cache's to answer; nor the network's, when the request says so.
            if localOnly { return unavailable(request, offline: offline) }
            if request.method == .get { missed(request) }
            return try await next.load(request)
        }
        guard request.method == .get else {
            if localOnly { return unavailable(request, offline: offline) }
            let response = try await next.load(request)
            if request.method == .head {
                update(after: response, of: request, address: address)
            } else {
                invalidate(after: response, of: request, address: address)
            }
            return response
        }
        if asked.noStore && !localOnly {
            missed(request)
            return try await next.load(request)
        }

        let entry = store.entry(for: address, matching: request)
        if let entry, let (outcome, refresh) = reuse(entry, asked: asked, offline: offline, at: now()) {
            counters.count(outcome == .hit ? \.hits : \.stale)
            request.report(.cache(outcome))
            if refresh, !localOnly { refreshInBackground(entry, request, address: address, next: next) }
            return entry.response(to: request, at: now())
        }
        if localOnly { return unavailable(request, offline: offline) }

        // To the origin: a question about the entry when it has a validator, else anew.
        let stored = entry.flatMap { $0.hasValidator && !request.hasConditions ? $0 : nil }
        let answer: APIResponse
        do {
            answer = try await next.load(stored.map { $0.conditional(request) } ?? request)
        } catch {
            // A ValidationMiddleware below the cache does not know that a 304 answers the
            // cache's own question, and fails it: that 304 is still the answer.
            if stored != nil, let response = error.response, response.status.code == 304 {
                answer = response
            } else if !Task.isCancelled, error.response.map({ Self.originFailed($0.status.code) }) ?? Self.originFailures.contains(error.code),
                let stale = staleIfError(entry, asked: asked, request: request)
            {
                return stale
            } else {
                counters.count(\.misses)
                request.report(.cache(.miss))
                throw error
            }
        }
        if Self.originFailed(answer.status.code), let stale = staleIfError(entry, asked: asked, request: request) { return stale }
        if let stored, answer.status.code == 304 {
            let refreshed = stored.refreshed(by: answer, at: now())
            replace(stored, with: refreshed, sent: answer.request, for: request, address: address)
            counters.count(\.revalidated)
            request.report(.cache(.revalidated))
            return refreshed.response(to: request, at: now())
        }
        counters.count(\.misses)
        request.report(.cache(.miss))
        // The answer to the cache's own question shows the caller's request, not it.
        let response = stored == nil ? answer : APIResponse(status: answer.status, headerFields: answer.headerFields, body: answer.body, request: request)
        keep(response, for: request, sent: answer.request, address: address)
        return response
    }

    /// How `entry` may answer `asked` without the origin, if it may (RFC 9111, 4.2 and
    /// 5.2.1; RFC 5861): `.hit` while fresh enough, `.stale` when a directive allows a
    /// stale answer, and whether that answer is revalidated in the background.
    private func reuse(_ entry: CacheEntry, asked: CacheControl, offline: Bool, at now: Date) -> (CallEvent.CacheOutcome, refresh: Bool)? {
        let age = entry.age(at: now)
        let staleness = entry.staleness(at: now)
        // The request's max-age: 0 asks for the origin's word, as no-cache does.
        let youngEnough = asked.maxAge.map { $0 > 0 && age <= TimeInterval($0) } ?? true
        let alwaysAsk = asked.noCache || entry.directives.noCache
        if !alwaysAsk, youngEnough, staleness < 0, asked.minFresh.map({ -staleness >= TimeInterval($0) }) ?? true { return (.hit, false) }
        // Never stale where the response forbids it (4.2.4), not even offline.
        guard !alwaysAsk, !entry.directives.mustRevalidate, staleness >= 0 || offline else { return nil }
        if offline { return (.stale, false) }
        guard youngEnough else { return nil }
        if let maxStale = asked.maxStale, staleness <= TimeInterval(maxStale) { return (.stale, false) }
        // The response's window, unless the request set its own limits.
        if asked.maxStale == nil, asked.minFresh == nil, let window = entry.directives.staleWhileRevalidate, staleness <= TimeInterval(window) {
            return (.stale, true)
        }
        return nil
    }

    /// `entry` as the answer to `request` when the origin failed and a `stale-if-error`
    /// (the response's or the request's) still covers it; reported as such.
    private func staleIfError(_ entry: CacheEntry?, asked: CacheControl, request: APIRequest) -> APIResponse? {
        guard let entry, !entry.directives.noCache, !entry.directives.mustRevalidate, !asked.noCache else { return nil }
        let window = max(entry.directives.staleIfError ?? -1, asked.staleIfError ?? -1)
        guard window >= 0, entry.staleness(at: now()) <= TimeInterval(window) else { return nil }
        counters.count(\.staleIfError)
        request.report(.cache(.staleIfError))
        return entry.response(to: request, at: now())
    }

    /// A GET the cache sent on without looking (a download, a request's `no-store`): a
    /// miss, so that every GET reports how the cache answered it.
    private func missed(_ request: APIRequest) {
        counters.count(\.misses)
        request.report(.cache(.miss))
    }

    /// The statuses RFC 5861 counts as the origin's failure.
    private static func originFailed(_ code: Int) -> Bool { [500, 502, 503, 504].contains(code) }

    /// The errors that say the origin gave no usable answer (not the caller's doing, and
    /// not a server that failed its identity check).
    private static let originFailures: Set<CatenaError.Code> = [
        .cannotConnect, .timedOut, .connectionLost, .invalidResponse, .circuitOpen, .retryBudgetExhausted,
    ]

    /// The answer to a request that may not go to the network and that the cache cannot
    /// answer: 504, as RFC 9111 (5.2.1.7) has it.
    private func unavailable(_ request: APIRequest, offline: Bool) -> APIResponse {
        counters.count(\.unavailable)
        request.report(.cache(.unavailable))
        let reason = offline ? "offline" : "only-if-cached"
        return APIResponse(
            status: .gatewayTimeout, headerFields: [.contentType: "text/plain; charset=utf-8"],
            body: Data("nothing usable in the cache for this request, which may not go to the network (\(reason))\n".utf8), request: request)
    }

    /// Revalidates `entry` for `request` once at a time per entry, in a task of its own
    /// that ``reset()`` cancels and waits for; the caller already has the stale answer.
    /// At most 64 run at once: past that, an entry waits for its next stale answer.
    private func refreshInBackground(_ entry: CacheEntry, _ request: APIRequest, address: String, next: some HTTPLoader) {
        // The call has ended: no observer (a span, a log line), no trace, no question of
        // the caller's own (its If-None-Match would make the 304 the cache's answer).
        let quiet = { (request: APIRequest) in
            var quiet = request
            quiet[option: CallObservers.self] = []
            for name in ["If-None-Match", "If-Modified-Since", "If-Match", "If-Unmodified-Since", "If-Range", "traceparent", "tracestate"] {
                if let field = HTTPField.Name(name) { quiet.headerFields[field] = nil }
            }
            return quiet
        }(request)
        let key = address + "\u{0}" + request.identityFingerprint
        let cache = self
        refreshing.withLock { state in
            guard state.tasks[key] == nil, state.tasks.count < 64 else { return }
            state.started += 1
            let id = state.started
            // Detached: nothing of the finished call's task-locals (its trace). Made under
            // the lock its own removal takes, so never removed before it is added; removed
            // by its id, so never another refresh's of the same key after a reset.
            state.tasks[key] = (
                id,
                Task.detached {
                    await cache.revalidate(entry, quiet, address: address, next: next)
                    cache.refreshing.withLock { state in
                        if state.tasks[key]?.id == id { state.tasks[key] = nil }
                    }
                }
            )
        }
    }

    private func revalidate(_ entry: CacheEntry, _ request: APIRequest, address: String, next: some HTTPLoader) async {
        let asksAbout = entry.hasValidator && !request.hasConditions
        // Stamped when sent, not when answered: the clock may move while it runs, and an
        // answer counted older is never served beyond its time (RFC 9111, 4.2.3).
        let sent = now()
        let answer: APIResponse
        do {
            answer = try await next.load(asksAbout ? entry.conditional(request) : request)
        } catch {
            guard asksAbout, let response = error.response, response.status.code == 304 else { return }
            answer = response
        }
        // Reset while it ran, or the origin failed: the entry stays as it was.
        guard !Task.isCancelled, !Self.originFailed(answer.status.code) else { return }
        if asksAbout, answer.status.code == 304 {
            replace(entry, with: entry.refreshed(by: answer, at: sent), sent: answer.request, for: request, address: address)
        } else {
            keep(
                APIResponse(status: answer.status, headerFields: answer.headerFields, body: answer.body, request: request), for: request,
                sent: answer.request, address: address, at: sent)
        }
    }

    /// A HEAD's 200 updates the stored GET it could have chosen when that is a 200 too,
    /// and a validator both carry (ETag, else Last-Modified) is the same, and so is the
    /// `Content-Length` when the HEAD sends one; otherwise the entry is dropped, as it may
    /// be out of date (RFC 9111, 4.3.5, allows either). No validator to compare is no
    /// evidence: dropped too.
    private func update(after head: APIResponse, of request: APIRequest, address: String) {
        guard head.status.code == 200, let entry = store.entry(for: address, matching: request) else { return }
        let length = entry.headerFields[.contentLength] ?? String(entry.body.count)
        let validator: HTTPField.Name? = [.eTag, .lastModified].first { head.headerFields[$0] != nil && entry.headerFields[$0] != nil }
        let agrees =
            entry.status.code == 200 && validator.map { head.headerFields[$0] == entry.headerFields[$0] } == true
            && head.headerFields[.contentLength].map { $0 == length } ?? true
        replace(entry, with: agrees ? entry.refreshed(by: head, at: now()) : nil, sent: head.request, for: request, address: address)
    }

    /// Stores `refreshed` in place of `original` when it may take its place (see
    /// `CacheEntry.mayReplace`); otherwise, or when there is none, drops the entry.
    private func replace(_ original: CacheEntry, with refreshed: CacheEntry?, sent: APIRequest, for request: APIRequest, address: String) {
        if let refreshed, refreshed.mayReplace(original, sent: sent) {
            store.put(refreshed, for: address, request: request, limit: maximumBytes)
        } else {
            store.remove(address, request: request)
        }
    }

    /// After a successful unsafe request, drops the entries its answer may have made
    /// out of date (RFC 9111, 4.4): its URL's, and those of its `Location` and
    /// `Content-Location` on the same origin, of every identity.
    private func invalidate(after response: APIResponse, of request: APIRequest, address: String) {
        guard [.post, .put, .patch, .delete].contains(request.method), (200..<400).contains(response.status.code) else { return }
        store.removeAll(forAddress: address)
        guard let base = try? request.url() else { return }
        for name in [HTTPField.Name.location, .contentLocation] {
            guard let value = response.headerFields[name], let target = URL(string: value, relativeTo: base)?.absoluteURL else { continue }
            let named = APIRequest(.get, url: target)
            guard named.originKey == request.originKey, let other = try? named.urlString() else { continue }
            store.removeAll(forAddress: other)
        }
    }

    /// Streams pass through, neither answered from the cache nor stored (a body read
    /// as it comes is not kept); a successful unsafe request still drops the entries
    /// for its URL.
    public func stream(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> StreamedResponse {
        try requireAbsolute(request, loader: "CacheMiddleware")
        // A stream is not the cache's to answer; nor the network's, when the request says so.
        let offline = request[option: CacheOffline.self]
        if offline || CacheControl(request.headerFields[.cacheControl]).onlyIfCached {
            return StreamedResponse(complete: unavailable(request, offline: offline))
        }
        let streamed = try await next.stream(request)
        if let address = try? request.urlString() {
            invalidate(
                after: APIResponse(status: streamed.status, headerFields: streamed.headerFields, body: Data(), request: request), of: request, address: address)
        }
        return streamed
    }

    /// Stores `response` unless HTTP forbids it. `sent` is the request as the loaders
    /// below sent it: placed above an auth loader, the cache sees no credentials in
    /// `request`, but the answer was still for one identity and stays private.
    private func keep(_ response: APIResponse, for request: APIRequest, sent: APIRequest, address: String, at arrival: Date? = nil) {
        if sent.carriesCredentials, !CacheControl(response.headerFields[.cacheControl]).isPublic {
            store.remove(address, request: request)
            return
        }
        guard let entry = CacheEntry(response: response, request: request, receivedAt: arrival ?? now()) else {
            store.remove(address, request: request)
            return
        }
        store.put(entry, for: address, request: request, limit: maximumBytes)
    }
}

/// Answer from a ``CacheMiddleware`` whatever an entry's age, without the network: for
/// an app that lost its connection, or `catena get --offline`. Entries whose response
/// said `no-cache` or `must-revalidate` are never served stale (RFC 9111, 4.2.4); with
/// nothing usable the answer is 504 Gateway Timeout, as for `only-if-cached`.
public enum CacheOffline: RequestOption {
    public static let defaultValue = false
}
