import Foundation
import HTTPTypes

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
        /// The origin's answer count when this window was last answered for.
        var lastAnswer = 0
    }

    /// The most windows (policies and `pk` partitions) kept per origin: a server names
    /// them, so their number is bounded; past it the least recently answered goes.
    static let maximumWindows = 16

    /// Answers learned from, to tell which window was answered for least recently.
    var answers = 0

    /// Drops the least recently answered window when the origin has its most; one with
    /// calls in flight only when every window has some.
    private mutating func makeRoomForWindow() {
        guard windows.count >= Self.maximumWindows else { return }
        let idle = windows.filter { $0.value.outstanding == 0 && $0.value.carried == 0 }
        let pool = idle.isEmpty ? windows : idle
        if let oldest = pool.min(by: { $0.value.lastAnswer < $1.value.lastAnswer }) { windows[oldest.key] = nil }
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
                let status = statuses.first { $0.windowKey == name }
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
        return learn(from: response, statuses: statuses, countedEarlier: countedEarlier, lateArrivals: lateArrivals, now: now, maxHold: maxHold)
    }

    /// Learns from an answer of this origin's to a call let through elsewhere (a
    /// redirect from another origin); returns the hold it set.
    mutating func learn(from response: APIResponse, now: Date, maxHold: Duration) -> Duration? {
        defer { wakeAll() }
        let statuses = RateLimitStatus.statuses(in: response.headerFields, now: now)
        return learn(from: response, statuses: statuses, countedEarlier: [], lateArrivals: [], now: now, maxHold: maxHold)
    }

    private mutating func learn(
        from response: APIResponse, statuses: [RateLimitStatus], countedEarlier: Set<String>, lateArrivals: Set<String>, now: Date,
        maxHold: Duration
    ) -> Duration? {
        learned = true
        answers &+= 1
        for status in statuses where !countedEarlier.contains(status.windowKey) {
            // A reset past maxHold is held to it: one answer cannot stop calls for a year.
            let end = status.reset.map { now.addingTimeInterval(min($0, maxHold).seconds) }
            let capped = status.reset.map { $0 > maxHold } ?? false
            guard var window = windows[status.windowKey] else {
                makeRoomForWindow()
                // Calls still in flight were sent before this was known: counted as spent.
                windows[status.windowKey] = Window(
                    remaining: max(0, status.remaining - inFlight), end: end, quota: status.quota, length: status.window,
                    generation: newGeneration(), endIsCapped: capped, lastAnswer: answers)
                continue
            }
            // An answer whose reset is a second or more past the end this window
            // is known to have comes from the window after it: calls let through near
            // the end reached the server after it and opened the next one, which is the
            // one to keep from now on. (Epoch resets are exact; delta seconds are not,
            // so a late answer of this window may look newer, which only waits longer.)
            if let end, let known = window.end, !window.endIsGuessed, !lateArrivals.contains(status.windowKey),
                end >= known.addingTimeInterval(0.9)  // a second, less the milliseconds of rounding
            {
                window = Window(
                    remaining: max(0, status.remaining - window.outstanding - window.carried), end: end, quota: status.quota ?? window.quota,
                    length: status.window ?? window.length, generation: newGeneration(),
                    carried: window.outstanding + window.carried, previousEnd: known, endIsCapped: capped, lastAnswer: answers)
                windows[status.windowKey] = window
                continue
            }
            window.remaining = min(window.remaining, status.remaining)
            // Each answer bounds the reset from above (the server rounds up); the
            // tightest bound wins, and the first answer replaces a guess. A call from
            // an earlier window may be misjudged (delta seconds are whole seconds), so
            // its answer never moves a known end earlier.
            if let end {
                if lateArrivals.contains(status.windowKey) {
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
            window.lastAnswer = answers
            windows[status.windowKey] = window
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
