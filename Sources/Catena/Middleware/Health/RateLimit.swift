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
        let held = origins.withState(key) { state in
            state.finish(ticket, response: try? result.get(), now: clock.now(), maxHold: maxHold)
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

/// One origin's limits, as learned from its answers and declared by the user.
struct LimiterState: OriginState {
    /// A server's policy, in its current window.
    struct Window {
        var remaining: Int
        /// When the quota comes back; nil when not known.
        var end: Date?
        /// Whether `end` was guessed from the last window's length, to be replaced by
        /// the first answer of this window.
        var endIsGuessed = false
        var quota: Int?
        var length: Duration?
        /// Counts windows, so that an answer from an earlier one is told apart.
        var generation = 0
        /// Calls let through in this window and still in flight.
        var outstanding = 0
        /// Calls let through in earlier windows and still in flight when this one
        /// began: the server may count them here (they reach it late), so they are
        /// spent here until their answers say otherwise.
        var carried = 0
        /// When the window before this one ended, as this client knew it.
        var previousEnd: Date?
        /// Whether `end` was cut to `maxHold`: the server's reset is later, so when it
        /// passes, the quota is learned again rather than taken as restored.
        var endIsCapped = false
    }

    /// A call that was let through: what it must report back when it ends.
    struct Ticket: Sendable {
        let generations: [String: Int]
        let probe: Bool
    }

    struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Void, Never>
    }

    enum Decision {
        case go(Ticket)
        case wait(until: Date, byRetryAfter: Bool)
        /// Wait for a call in flight to answer; `learning` when that is the origin's first.
        case waitForNews(id: UInt64, learning: Bool)
    }

    var windows: [String: Window] = [:]
    /// Send times of the last calls, for a declared limit (oldest first).
    var sent: [Date] = []
    var holdUntil: Date?
    var learned = false
    var probing = false
    var inFlight = 0
    var waiters: [Waiter] = []
    var nextWaiterID: UInt64 = 0

    var isIdle: Bool { inFlight == 0 && waiters.isEmpty }

    init(learned: Bool = false) {
        self.learned = learned
    }

    mutating func decide(now: Date, declared: RateLimitMiddleware.Quota?, learnsFirst: Bool, maxHold: Duration) -> Decision {
        // No wait is longer than maxHold from now, also after the wall clock stepped back.
        let latest = now.addingTimeInterval(maxHold.seconds)
        if let holdUntil {
            if holdUntil > now { return .wait(until: min(holdUntil, latest), byRetryAfter: true) }
            self.holdUntil = nil
        }
        for (name, window) in windows {
            guard let end = window.end else { continue }
            if end > latest {
                windows[name]!.end = latest
                windows[name]!.endIsCapped = true
            }
            guard end <= now else { continue }
            // The window is over. A known quota starts afresh in the window that holds
            // now (several may have passed while idle); an unknown one, or one whose end
            // was only this client's cap, is learned again by one call.
            guard let quota = window.quota, !window.endIsCapped else {
                windows[name] = nil
                learned = false
                continue
            }
            let carried = window.outstanding + window.carried
            var next = Window(
                remaining: max(0, quota - carried), quota: quota, length: window.length, generation: newGeneration(), carried: carried,
                previousEnd: end)
            if let length = window.length?.seconds, length > 0 {
                let passed = max(1, (now.timeIntervalSince(end) / length).rounded(.up))
                var nextEnd = end.addingTimeInterval(min(passed, 1e9) * length)
                if nextEnd <= now { nextEnd = now.addingTimeInterval(length) }
                next.end = min(nextEnd, latest)
                next.endIsGuessed = true
            }
            windows[name] = next
        }
        if let declared {
            let windowStart = now.addingTimeInterval(-declared.window.seconds)
            sent.removeAll { $0 <= windowStart || $0 > now }
            if sent.count >= declared.calls {
                return .wait(until: sent[sent.count - declared.calls].addingTimeInterval(declared.window.seconds), byRetryAfter: false)
            }
        }
        for (name, window) in windows where window.remaining <= 0 {
            if let end = window.end { return .wait(until: end, byRetryAfter: false) }
            // Spent, with no reset known: the calls in flight will tell; with none, forget it.
            guard inFlight == 0 else { return newsWait(learning: false) }
            windows[name] = nil
        }
        if learnsFirst && !learned && probing { return newsWait(learning: true) }
        for name in windows.keys {
            windows[name]!.remaining -= 1
            windows[name]!.outstanding += 1
        }
        if declared != nil { sent.append(now) }
        let probe = !learned && !probing
        if probe { probing = true }
        inFlight += 1
        return .go(Ticket(generations: windows.mapValues(\.generation), probe: probe))
    }

    /// Generations count across every window of every policy, so that a ticket from a
    /// window that was dropped never matches one made later under the same name.
    private var lastGeneration = 0

    private mutating func newGeneration() -> Int {
        lastGeneration += 1
        return lastGeneration
    }

    private mutating func newsWait(learning: Bool) -> Decision {
        nextWaiterID += 1
        return .waitForNews(id: nextWaiterID, learning: learning)
    }

    /// Records a call's end; returns how long its answer holds the origin, if it does.
    /// Wakes every waiter, to decide again.
    mutating func finish(_ ticket: Ticket, response: APIResponse?, now: Date, maxHold: Duration) -> Duration? {
        inFlight -= 1
        if ticket.probe { probing = false }
        defer { wakeAll() }
        let statuses = response.map { RateLimitStatus.statuses(in: $0.headerFields, now: now) } ?? []
        // A call from an earlier window ends: in this window's count no more.
        var countedEarlier: Set<String> = [], lateArrivals: Set<String> = []
        for (name, generation) in ticket.generations {
            guard var window = windows[name] else { continue }
            if generation == window.generation {
                window.outstanding = max(0, window.outstanding - 1)
            } else if window.carried > 0 {
                window.carried -= 1
                // Its answer names the window that counted it: one that ended by this
                // window's start (a second's rounding allowed) gives the call back.
                let status = statuses.first { $0.policy == name }
                let end = status?.reset.map { now.addingTimeInterval($0.seconds) }
                if let end, let previousEnd = window.previousEnd, end <= previousEnd.addingTimeInterval(0.5) {
                    window.remaining = min(window.remaining + 1, window.quota ?? .max)
                    countedEarlier.insert(name)
                } else if end == nil {
                    countedEarlier.insert(name)  // no answer to tell: it stays spent here
                } else {
                    lateArrivals.insert(name)
                }
            } else {
                countedEarlier.insert(name)
            }
            windows[name] = window
        }
        guard let response else { return nil }
        learned = true
        for status in statuses where !countedEarlier.contains(status.policy) {
            // A reset past maxHold is held to it: one answer cannot stop calls for a year.
            let end = status.reset.map { now.addingTimeInterval(min($0, maxHold).seconds) }
            let capped = status.reset.map { $0 > maxHold } ?? false
            guard var window = windows[status.policy] else {
                // Calls still in flight were sent before this was known: counted as spent.
                windows[status.policy] = Window(
                    remaining: max(0, status.remaining - inFlight), end: end, quota: status.quota, length: status.window,
                    generation: newGeneration(), endIsCapped: capped)
                continue
            }
            // An answer whose reset is a second or more past the end this window
            // is known to have comes from the window after it: calls let through near
            // the end reached the server after it and opened the next one, which is the
            // one to keep from now on. (Epoch resets are exact; delta seconds are not,
            // so a late answer of this window may look newer, which only waits longer.)
            if let end, let known = window.end, !window.endIsGuessed, !lateArrivals.contains(status.policy),
                end >= known.addingTimeInterval(0.9)  // a second, less the milliseconds of rounding
            {
                window = Window(
                    remaining: max(0, status.remaining - window.outstanding - window.carried), end: end, quota: status.quota ?? window.quota,
                    length: status.window ?? window.length, generation: newGeneration(),
                    carried: window.outstanding + window.carried, previousEnd: known, endIsCapped: capped)
                windows[status.policy] = window
                continue
            }
            window.remaining = min(window.remaining, status.remaining)
            // Each answer bounds the reset from above (the server rounds up); the
            // tightest bound wins, and the first answer replaces a guess. A call from
            // an earlier window may be misjudged (delta seconds are whole seconds), so
            // its answer never moves a known end earlier.
            if let end {
                if lateArrivals.contains(status.policy) {
                    // Only where nothing is known, and as a guess that this window's own answers replace.
                    if window.end == nil {
                        window.end = end
                        window.endIsGuessed = true
                    }
                } else if let known = window.end, !window.endIsGuessed {
                    if end < known { window.endIsCapped = capped }
                    window.end = min(known, end)
                } else {
                    window.end = end
                    window.endIsGuessed = false
                    window.endIsCapped = capped
                }
            }
            window.quota = status.quota ?? window.quota
            window.length = status.window ?? window.length
            windows[status.policy] = window
        }
        let code = response.status.code
        guard code == 429 || code == 503 else { return nil }
        // A 429 that says nothing usable about when holds the origin a second, unless
        // its fields already hold a spent policy until a known reset.
        let said = response.headerFields[.retryAfter].flatMap { Self.retryAfter($0, now: now) }
        let spentUntilKnown = statuses.contains { $0.remaining == 0 && $0.reset != nil }
        guard let hold = said ?? (code == 429 && !spentUntilKnown ? .seconds(1) : nil) else { return nil }
        let capped = min(hold, maxHold)
        let until = now.addingTimeInterval(capped.seconds)
        holdUntil = max(holdUntil ?? until, until)
        return capped
    }

    /// `Retry-After` as ``RetryMiddleware`` reads it, and a number of seconds too large
    /// for an integer as the longest hold.
    static func retryAfter(_ value: String, now: Date) -> Duration? {
        if let parsed = RetryMiddleware.parseRetryAfter(value, now: now) { return parsed }
        let digits = value.trimmingCharacters(in: .whitespaces)
        return !digits.isEmpty && digits.utf8.allSatisfy({ (48...57).contains($0) }) ? RateLimitStatus.longestReset : nil
    }

    /// Queues a waiter, unless a call ended since it decided to wait, or none is in
    /// flight to end (then it decides again).
    mutating func enqueue(_ waiter: Waiter) -> Bool {
        guard waiter.id > lastWake, inFlight > 0 else { return false }
        waiters.append(waiter)
        return true
    }

    /// The id of the last waiter handed out when everyone was last woken.
    private var lastWake: UInt64 = 0

    mutating func removeWaiter(_ id: UInt64) -> Waiter? {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return nil }
        return waiters.remove(at: index)
    }

    /// Forgets what was learned and held; keeps the count of calls in flight, which
    /// still end here, and wakes the waiters to decide afresh.
    mutating func forget() {
        windows = [:]
        sent = []
        holdUntil = nil
        learned = false
        wakeAll()
    }

    private mutating func wakeAll() {
        lastWake = nextWaiterID
        let woken = waiters
        waiters.removeAll()
        for waiter in woken { waiter.continuation.resume() }
    }
}
