/// Something that happened inside a call, reported by the loaders that saw it to
/// whoever observes the call (tracing and metrics middleware, a test).
///
/// Loaders report only what the caller cannot see from the outcome alone: the attempts
/// ``RetryMiddleware`` made, the token refreshes ``TokenAuthMiddleware`` waited for, what ``CacheMiddleware``
/// decided, the sends a transport repeated on its own, and what the health middleware
/// did (paced, held, budget spent, circuit changed, hedged).
public enum CallEvent: Sendable, Equatable {
    /// ``RetryMiddleware`` is about to wait `delay` and send attempt number `attempt` (2, 3, …),
    /// because the previous attempt ended as `after` says.
    case retrying(attempt: Int, delay: Duration, after: Outcome)
    /// The transport sent the request again by itself, because the attempt failed
    /// with `after` before any response head (a reused connection turned out closed).
    case resent(after: CatenaError.Code)
    /// ``TokenAuthMiddleware`` needed a new token for this call and waited `waited` for it.
    /// `startedRefresh` is false when the call joined a refresh another call started;
    /// `succeeded` says whether a token came back.
    case tokenRefresh(startedRefresh: Bool, waited: Duration, succeeded: Bool)
    /// What ``CacheMiddleware`` did with this call.
    case cache(CacheOutcome)
    /// The connection an exchange went over, new or reused, reported by a transport
    /// that sees it: `AsyncHTTPClientTransport` just before ``responseHead(status:after:)``;
    /// Apple's URLSession when it delivers the task's metrics, after the head.
    case connection(ConnectionInfo)
    /// A transport received a response head with status `status`, `after` it handed
    /// the request to its HTTP client (once per exchange: each attempt and each
    /// redirect hop has its own).
    case responseHead(status: Int, after: Duration)
    /// ``RateLimitMiddleware`` held this call `waited` before letting it go: for the
    /// origin's quota, or, when `byRetryAfter`, for a `Retry-After` that holds it.
    case rateLimitWait(waited: Duration, byRetryAfter: Bool)
    /// This call's answer (a 429 or 503) holds its origin for `for`: every call to it
    /// waits until then.
    case rateLimitHold(for: Duration)
    /// ``RetryMiddleware`` did not retry this call, or ``HedgeMiddleware`` did not
    /// hedge it, because the origin's ``RetryBudget`` was spent.
    case retryBudgetExhausted
    /// This call moved its origin's circuit to `state` (``CircuitBreakerMiddleware``):
    /// its failure opened it, it is the probe of a half-open circuit, or its success
    /// closed it.
    case circuit(CircuitState)
    /// ``HedgeMiddleware`` sent a second attempt, `after` the first had no answer.
    case hedgeSent(after: Duration)
    /// The hedged attempt answered first; the first attempt was cancelled.
    case hedgeWon
    /// A transport produced a request body of `bytes` bytes to send (once per
    /// attempt; a streamed body only when its length is known).
    case bodySent(bytes: Int64)

    /// How an attempt ended: with a status, or with an error.
    public enum Outcome: Sendable, Equatable {
        /// The server answered with this status code.
        case status(Int)
        /// The attempt failed with this code.
        case error(CatenaError.Code)
    }

    /// What ``CacheMiddleware`` did with a call.
    public enum CacheOutcome: String, Sendable, Equatable, CaseIterable {
        /// Answered from a fresh entry, without the network.
        case hit
        /// Answered by the server (no entry, or an entry the server replaced).
        case miss
        /// A stale entry the server confirmed with 304.
        case revalidated
        /// A stale entry answered without the network, as allowed: within the response's
        /// `stale-while-revalidate` (revalidated in the background), the request's
        /// `max-stale`, or offline (``CacheOffline``).
        case stale
        /// A stale entry answered because the origin failed (a 500, 502, 503 or 504, or no
        /// answer at all), within `stale-if-error`.
        case staleIfError = "stale-if-error"
        /// Nothing usable stored, and the request may not go to the network
        /// (`only-if-cached`, or offline): answered 504 Gateway Timeout.
        case unavailable
    }
}

/// The states of a ``CircuitBreakerMiddleware``'s circuit for one origin.
public enum CircuitState: String, Sendable, Equatable {
    /// Calls go through; failures are counted.
    case closed
    /// Calls fail at once with ``CatenaError/Code/circuitOpen`` until the cool-down ends.
    case open
    /// The cool-down is over: one probe call goes through, and its outcome closes or
    /// opens the circuit again.
    case halfOpen = "half_open"
}

/// Receives the ``CallEvent``s of calls. Set on a request with
/// ``APIRequest/observe(_:)``; called on whatever task reports, possibly concurrently,
/// so it must be quick and thread-safe.
public struct CallObserver: Sendable {
    let handle: @Sendable (CallEvent) -> Void

    /// An observer that hands each event to `handle`.
    public init(_ handle: @escaping @Sendable (CallEvent) -> Void) {
        self.handle = handle
    }
}

/// The observers a request carries; every loader below reports to all of them.
enum CallObservers: RequestOption {
    static let defaultValue: [CallObserver] = []
}

extension APIRequest {
    /// Adds `observer` to the ones this request reports its ``CallEvent``s to. The
    /// observers travel with the request down the chain, so only loaders below the one
    /// that adds an observer report to it.
    public mutating func observe(_ observer: CallObserver) {
        self[option: CallObservers.self].append(observer)
    }

    /// Reports `event` to this request's observers; does nothing (one dictionary
    /// lookup) when there are none. For middleware that wants its own events seen.
    public func report(_ event: @autoclosure () -> CallEvent) {
        let observers = self[option: CallObservers.self]
        guard !observers.isEmpty else { return }
        let event = event()
        for observer in observers { observer.handle(event) }
    }
}
