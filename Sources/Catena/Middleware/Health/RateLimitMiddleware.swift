import Foundation
import HTTPTypes

/// Keeps each origin's calls within the rate limit it announces, so that a fan-out
/// waits its turn instead of running into 429s.
///
/// - **Announced limits.** Every response's rate-limit fields (``RateLimitStatus``:
///   IETF `RateLimit`/`RateLimit-Policy`, `X-RateLimit-*`) say how many calls are left
///   and when the quota comes back. Calls are let through while some are left; then
///   they wait for the reset. Calls in flight are counted as spent, so a fan-out cannot
///   overshoot while answers are still on their way, and an answer from an earlier
///   window does not overwrite the current one.
/// - **Learning first.** Until an origin's first answer is in, one call at a time goes
///   to it (`learnsFirst`), so that a fan-out as the very first thing is paced too; while
///   none has answered, one more goes every 2 s, so a slow first call holds no others long.
/// - **`Retry-After`.** A 429 or 503 with `Retry-After` holds the whole origin: every
///   call to it waits until then, not only the one that was told. The hold is capped
///   at `maxHold`, and so is a reset: past it one call goes to learn whether the origin
///   is still spent. A 429 without `Retry-After` or rate-limit fields holds it a second.
/// - **Declared limits.** `declared` gives a limit for hosts that document one without
///   sending fields: at most `calls` in any `window` (a sliding window, so no window of
///   the server's, wherever it starts, sees more).
///
/// The limiter sees when it lets a call go, not when the server counts it: a call let
/// through just before a window ends that reaches the server after it (a new
/// connection, a loaded machine) is counted in the next window, and a 429 it causes
/// holds the origin as above.
///
/// A call never waits longer than `maxWait` in all: one that would fails at once with
/// ``CatenaError/Code/rateLimited``, naming the origin and when its quota comes back.
/// Waiting ends at once when the calling task is cancelled (``CatenaError/Code/cancelled``);
/// ``reset()`` forgets what was learned.
///
/// Put it below ``RetryMiddleware``, so each attempt is paced, and above the transport.
/// State is kept per origin (`scheme://host:port`), or per the key `partition` returns
/// (to keep one API key's quota apart from another's).
public struct RateLimitMiddleware: HTTPMiddleware {
    /// A limit of `calls` per `window`.
    public struct Quota: Sendable, Hashable {
        /// Calls allowed in any window.
        public var calls: Int
        /// The window's length.
        public var window: Duration

        /// At most `calls` (at least 1) in any `window`.
        public init(_ calls: Int, per window: Duration) {
            self.calls = max(1, calls)
            self.window = max(.milliseconds(1), window)
        }
    }

    /// The longest a call waits for its turn, in all.
    public let maxWait: Duration
    /// The longest a `Retry-After` holds an origin.
    public let maxHold: Duration
    /// Whether an origin's first call goes alone, to learn its limits.
    public let learnsFirst: Bool
    private let declared: [String: Quota]
    private let partition: (@Sendable (APIRequest) -> String)?
    private let clock: any RetryClock
    private let origins: OriginTable<LimiterState>

    /// A rate limiter.
    ///
    /// - Parameters:
    ///   - declared: limits for hosts that do not announce theirs, by `"host"` or
    ///     `"host:port"`.
    ///   - maxWait: the longest a call waits for its turn before it fails with
    ///     ``CatenaError/Code/rateLimited``.
    ///   - maxHold: the longest a `Retry-After` or an announced reset holds an origin (at
    ///     least 1 s); past it one call goes to learn whether the origin is still spent.
    ///   - learnsFirst: send an origin's first call alone, so that its answer's limits
    ///     pace the calls after it.
    ///   - partition: the key state is kept under; by default the origin. Return the
    ///     origin and an account's name to keep accounts apart.
    ///   - clock: what to wait on; inject a virtual clock in tests.
    public init(
        declared: [String: Quota] = [:], maxWait: Duration = .seconds(30), maxHold: Duration = .seconds(60), learnsFirst: Bool = true,
        partition: (@Sendable (APIRequest) -> String)? = nil, clock: any RetryClock = SystemRetryClock()
    ) {
        self.declared = Dictionary(declared.map { (Self.hostKey($0.key), $0.value) }, uniquingKeysWith: { $1 })
        self.maxWait = max(.zero, maxWait)
        // At least a second: a window that ends as it starts would be decided again and again.
        self.maxHold = max(.seconds(1), maxHold)
        self.learnsFirst = learnsFirst
        self.partition = partition
        self.clock = clock
        self.origins = OriginTable { LimiterState() }
    }

    public func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        let key = partition?(request) ?? request.originKey
        let ticket = try await admit(request, key: key)
        let result = await next.result(for: request)
        // The answer, returned or inside an error, is charged to the origin that gave it.
        let answer = result.answer
        let now = clock.now()
        let held: Duration?
        if let answer, partition == nil, answer.answeringOriginKey != key {
            origins.withState(key) { state in
                _ = state.finish(ticket, response: nil, now: now, maxHold: maxHold)
                // It answered (with a redirect): its first call is no longer out learning.
                state.learned = true
            }
            held = origins.withState(answer.answeringOriginKey) { $0.learn(from: answer, now: now, maxHold: maxHold) }
        } else {
            held = origins.withState(key) { $0.finish(ticket, response: answer, now: now, maxHold: maxHold) }
        }
        if let held { request.report(.rateLimitHold(for: held)) }
        return try result.get()
    }

    /// Forgets every origin's limits and holds. Calls waiting for answers decide again;
    /// calls waiting out a hold or a window's end finish that wait (a
    /// ``ResetGuardMiddleware`` above cancels them).
    public func reset() async {
        origins.forEach { $0.forget() }
    }

    /// Waits until `request` may go, and takes its place in the quota.
    private func admit(_ request: APIRequest, key: String) async throws(CatenaError) -> LimiterState.Ticket {
        let start = clock.now()
        let quota = declaredQuota(for: request)
        var waited: (Duration, byRetryAfter: Bool)?
        defer {
            if let waited { request.report(.rateLimitWait(waited: waited.0, byRetryAfter: waited.byRetryAfter)) }
        }
        while true {
            if Task.isCancelled { throw CatenaError(.cancelled, request: request, detail: "cancelled while waiting for the rate limit") }
            let now = clock.now()
            let decision = origins.withState(key) { $0.decide(now: now, declared: quota, learnsFirst: learnsFirst, maxHold: maxHold) }
            let elapsed = Duration.seconds(max(0, now.timeIntervalSince(start)))
            switch decision {
            case .go(let ticket):
                if let previous = waited { waited = (elapsed, previous.byRetryAfter) }
                return ticket
            case .wait(let until, let byRetryAfter):
                let delay = Duration.seconds(max(0, until.timeIntervalSince(now)))
                guard elapsed + delay <= maxWait else {
                    let reason = byRetryAfter ? "is held by Retry-After" : "has no calls left"
                    throw CatenaError(
                        .rateLimited, request: request,
                        detail:
                            "\(request.originName) \(reason) for \(Self.describe(delay)), longer than this call may wait (\(Self.describe(maxWait - elapsed)) left of \(Self.describe(maxWait)))"
                    )
                }
                waited = (elapsed, byRetryAfter || (waited?.byRetryAfter ?? false))
                do {
                    try await clock.sleep(for: delay)
                } catch {
                    throw CatenaError(.cancelled, request: request, underlyingError: error, detail: "cancelled while waiting for the rate limit")
                }
            case .waitForNews(let id, let learning):
                // The first call's answer is awaited only briefly: a slow first call (a
                // long poll) must not hold every other call to its origin.
                let left = maxWait - elapsed
                guard left > .zero || learning else {
                    throw CatenaError(
                        .rateLimited, request: request,
                        detail:
                            "\(request.originName) has no calls left until its calls in flight answer, longer than this call may wait (\(Self.describe(maxWait)))"
                    )
                }
                waited = (elapsed, waited?.byRetryAfter ?? false)
                let answered = await waitForNews(key: key, id: id, atMost: learning ? min(max(left, .zero), Self.learningWait) : left)
                if Task.isCancelled { throw CatenaError(.cancelled, request: request, detail: "cancelled while waiting for the rate limit") }
                // Still no answer: one more call may go to learn, the others wait on.
                if !answered && learning { origins.withState(key) { $0.probing = false } }
            }
        }
    }

    /// The longest calls wait for an origin's first answer before going unpaced.
    static let learningWait = Duration.seconds(2)

    /// Waits until a call in flight to `key` finishes, the table is reset or the task
    /// is cancelled (true), or `limit` passes (false); the caller then decides again.
    private func waitForNews(key: String, id: UInt64, atMost limit: Duration) async -> Bool {
        let clock = clock
        return await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await waitForNews(key: key, id: id)
                return true
            }
            group.addTask {
                try? await clock.sleep(for: limit)
                return false
            }
            let first = await group.next() ?? true
            group.cancelAll()
            return first
        }
    }

    private func waitForNews(key: String, id: UInt64) async {
        let origins = origins
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                // Cancelled before joining: the handler below has run, or will find nothing.
                let queued = origins.withState(key) { state in
                    !Task.isCancelled && state.enqueue(.init(id: id, continuation: continuation))
                }
                if !queued { continuation.resume() }
            }
        } onCancel: {
            let waiter = origins.withState(key) { state in state.removeWaiter(id) }
            waiter?.continuation.resume()
        }
    }

    private func declaredQuota(for request: APIRequest) -> Quota? {
        guard !declared.isEmpty, request.host != nil else { return nil }
        return declared[request.originName] ?? declared[(request.host ?? "").lowercased()]
    }

    /// `"host"` or `"host:port"` as given, lowercased, without a scheme or a trailing
    /// slash, and a default port written out, so that it compares with ``APIRequest/originName``.
    private static func hostKey(_ key: String) -> String {
        var key = key.lowercased()
        var port = ""
        for scheme in ["https://", "http://"] where key.hasPrefix(scheme) {
            key.removeFirst(scheme.count)
            port = scheme == "https://" ? ":443" : ":80"
        }
        while key.hasSuffix("/") { key.removeLast() }
        // "host:443" or "[::1]:443" name a port; "host" and "::1" do not.
        let hasPort: Bool
        if let colon = key.lastIndex(of: ":") {
            let digits = key[key.index(after: colon)...]
            let host = key[..<colon]
            hasPort = !digits.isEmpty && digits.allSatisfy { ("0"..."9").contains($0) } && (host.hasSuffix("]") || !host.contains(":"))
        } else {
            hasPort = false
        }
        if key.hasPrefix("["), let close = key.firstIndex(of: "]") {
            // originName writes an IPv6 host without brackets.
            key = String(key[key.index(after: key.startIndex)..<close]) + key[key.index(after: close)...]
        }
        return hasPort || port.isEmpty ? key : key + port
    }

    static func describe(_ duration: Duration) -> String {
        let seconds = min(duration.seconds, 1e12)
        return seconds < 10 ? String(format: "%.1f s", seconds) : "\(Int(seconds.rounded())) s"
    }
}
