import Foundation

/// Fails calls to an origin at once while it keeps failing, instead of sending each
/// one to wait for its timeout: a circuit breaker per origin.
///
/// - **Closed**: calls go through; failures are counted.
/// - **Open**, after `consecutiveFailures` failures in a row, or a share of failures
///   of at least `failureRate` among at least `minimumCalls` calls in the last
///   `window`: every call fails at once with ``CatenaError/Code/circuitOpen``, naming
///   the origin and when it lets a call try again. Nothing is sent.
/// - **Half-open**, once `coolDown` has passed: one call goes through as a probe while
///   the others still fail at once. Its success closes the circuit; its failure opens
///   it for another `coolDown`; a probe that is cancelled lets the next call probe.
///
/// What counts as a failure is `isFailure`'s to say; by default refused, lost and
/// timed-out connections, unusable answers and 5xx statuses, never a 4xx. Put it
/// below ``RetryMiddleware``: each attempt is counted, and ``CatenaError/Code/circuitOpen``
/// is not retried. Each change of state is reported on the call that made it
/// (``CallEvent/circuit(_:)``).
public struct CircuitBreakerMiddleware: HTTPMiddleware {
    /// When the circuit opens, and for how long.
    public struct Policy: Sendable {
        /// Failures in a row that open the circuit.
        public var consecutiveFailures: Int
        /// The share of failed calls in `window` that opens the circuit; nil for none.
        public var failureRate: Double?
        /// Calls in `window` needed before `failureRate` counts.
        public var minimumCalls: Int
        /// How far back `failureRate` looks.
        public var window: Duration
        /// How long the circuit stays open before a probe.
        public var coolDown: Duration
        /// Whether a call's outcome is a failure of the origin.
        public var isFailure: @Sendable (Result<APIResponse, CatenaError>) -> Bool

        /// A policy; the defaults open after 5 failures in a row, or half of at least
        /// 20 calls in 10 s, for 5 s.
        public init(
            consecutiveFailures: Int = 5, failureRate: Double? = 0.5, minimumCalls: Int = 20, window: Duration = .seconds(10),
            coolDown: Duration = .seconds(5),
            isFailure: @escaping @Sendable (Result<APIResponse, CatenaError>) -> Bool = CircuitBreakerMiddleware.Policy.originFailed
        ) {
            self.consecutiveFailures = max(1, consecutiveFailures)
            self.failureRate = failureRate.map { min(1, max(0, $0)) }
            self.minimumCalls = max(1, minimumCalls)
            self.window = max(.seconds(1), window)
            self.coolDown = max(.zero, coolDown)
            self.isFailure = isFailure
        }

        /// The default failures: ``CatenaError/Code/cannotConnect``,
        /// ``CatenaError/Code/connectionLost``, ``CatenaError/Code/timedOut``,
        /// ``CatenaError/Code/invalidResponse``, and any 5xx status, as a response or
        /// as the response of an error.
        public static func originFailed(_ outcome: Result<APIResponse, CatenaError>) -> Bool {
            switch outcome {
            case .success(let response): return response.status.code >= 500
            case .failure(let error):
                if let status = error.response?.status.code, error.code == .unacceptableStatus { return status >= 500 }
                return [.cannotConnect, .connectionLost, .timedOut, .invalidResponse].contains(error.code)
            }
        }
    }

    /// When circuits open and for how long.
    public let policy: Policy
    private let clock: any RetryClock
    private let origins: OriginTable<CircuitState.Tracker>

    /// A circuit breaker.
    public init(_ policy: Policy = Policy(), clock: any RetryClock = SystemRetryClock()) {
        self.policy = policy
        self.clock = clock
        self.origins = OriginTable { CircuitState.Tracker() }
    }

    public func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        let key = request.originKey
        let admission = origins.withState(key) { $0.admit(now: clock.now(), policy: policy) }
        let probe: Int?
        switch admission {
        case .refuse(let detail):
            throw CatenaError(.circuitOpen, request: request, detail: "the circuit for \(request.originName) is open \(detail)")
        case .go(let epoch):
            probe = epoch
            if epoch != nil { request.report(.circuit(.halfOpen)) }
        }
        let result = await next.result(for: request)
        let cancelled: Bool
        if case .failure(let error) = result { cancelled = error.code == .cancelled || error.code == .resetInProgress } else { cancelled = false }
        let failed = !cancelled && policy.isFailure(result)
        // Only the origin's answer, or a failure to reach it, decides: a call refused on
        // this side (rate-limited, invalid, unauthenticated, untrusted) says nothing of
        // its health, and leaves a half-open circuit to the next probe.
        let answer = result.answer
        let neutral = cancelled || (!failed && answer == nil)
        let now = clock.now()
        let change: CircuitState?
        if let answer, answer.answeringOriginKey != key {
            // After a redirect the transport followed, the origin that answered last is
            // charged; this one answered with the redirect, which is no failure.
            _ = origins.withState(key) { $0.finish(failed: false, neutral: false, probe: probe, now: now, policy: policy) }
            change = origins.withState(answer.answeringOriginKey) { $0.finish(failed: failed, neutral: false, probe: nil, now: now, policy: policy) }
        } else {
            change = origins.withState(key) { $0.finish(failed: failed, neutral: neutral, probe: probe, now: now, policy: policy) }
        }
        if let change { request.report(.circuit(change)) }
        return try result.get()
    }

    /// The state of `request`'s origin's circuit now.
    public func state(for request: APIRequest) -> CircuitState {
        origins.withState(request.originKey) { $0.state(now: clock.now()) }
    }

    /// Closes every circuit and forgets the counts.
    public func reset() async {
        origins.forEach { $0.forget() }
    }
}

extension CircuitState {
    /// One origin's circuit.
    struct Tracker: OriginState {
        enum Phase {
            case closed
            case open(until: Date, reason: String)
            case halfOpen(probing: Bool)
        }

        enum Admission {
            /// `probe` carries the epoch it was let through in, or nil for an ordinary call.
            case go(probe: Int?)
            case refuse(String)
        }

        var phase = Phase.closed
        /// Counts resets: a probe let through before one decides nothing after it.
        var epoch = 0
        var consecutive = 0
        /// Calls and failures in the window, in ten buckets.
        var buckets: [(index: Int64, calls: Int, failures: Int)] = Array(repeating: (.min, 0, 0), count: 10)

        /// Any circuit but one whose probe is out may be dropped: past the table's
        /// capacity an open circuit is forgotten rather than memory grown.
        var isIdle: Bool {
            if case .halfOpen(probing: true) = phase { return false }
            return true
        }

        func state(now: Date) -> CircuitState {
            switch phase {
            case .closed: .closed
            case .open(let until, _): until <= now ? .halfOpen : .open
            case .halfOpen: .halfOpen
            }
        }

        mutating func admit(now: Date, policy: CircuitBreakerMiddleware.Policy) -> Admission {
            switch phase {
            case .closed:
                return .go(probe: nil)
            case .open(let until, let reason):
                guard until <= now else {
                    let wait = RateLimitMiddleware.describe(.seconds(until.timeIntervalSince(now)))
                    return .refuse("after \(reason); it lets a call try again in \(wait)")
                }
                phase = .halfOpen(probing: true)
                return .go(probe: epoch)
            case .halfOpen(let probing):
                guard probing else {
                    phase = .halfOpen(probing: true)
                    return .go(probe: epoch)
                }
                return .refuse("after repeated failures; a probe call is deciding whether to close it")
            }
        }

        /// Records an outcome; returns the state it moved the circuit to, if it did.
        mutating func finish(failed: Bool, neutral: Bool, probe: Int?, now: Date, policy: CircuitBreakerMiddleware.Policy) -> CircuitState? {
            if let probe {
                guard probe == epoch else { return nil }
                if neutral {
                    phase = .halfOpen(probing: false)
                    return nil
                }
                if failed {
                    phase = .open(until: now.addingTimeInterval(policy.coolDown.seconds), reason: "its probe call failed")
                    return .open
                }
                forget()
                return .closed
            }
            guard !neutral else { return nil }
            let bucket = Self.bucket(now, policy.window)
            let slot = Int(((bucket % 10) + 10) % 10)
            if buckets[slot].index != bucket { buckets[slot] = (bucket, 0, 0) }
            buckets[slot].calls += 1
            guard failed else {
                consecutive = 0
                return nil
            }
            buckets[slot].failures += 1
            consecutive += 1
            guard case .closed = phase else { return nil }  // already open: a call from before
            var reason: String?
            if consecutive >= policy.consecutiveFailures {
                reason = "\(consecutive) failures in a row"
            } else if let rate = policy.failureRate {
                let live = buckets.filter { (bucket - 9...bucket).contains($0.index) }
                let calls = live.reduce(0) { $0 + $1.calls }, failures = live.reduce(0) { $0 + $1.failures }
                if calls >= policy.minimumCalls && Double(failures) >= rate * Double(calls) {
                    reason = "\(failures) failures in \(calls) calls"
                }
            }
            guard let reason else { return nil }
            phase = .open(until: now.addingTimeInterval(policy.coolDown.seconds), reason: reason)
            return .open
        }

        mutating func forget() {
            epoch += 1
            phase = .closed
            consecutive = 0
            buckets = Array(repeating: (.min, 0, 0), count: 10)
        }

        private static func bucket(_ date: Date, _ window: Duration) -> Int64 {
            let index = (date.timeIntervalSinceReferenceDate / (window.seconds / 10)).rounded(.down)
            return index.isFinite ? Int64(max(-9e18, min(9e18, index))) : 0
        }
    }
}
