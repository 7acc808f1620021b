import Foundation
public import HTTPTypes

/// When and how often to retry. Set it per request as a ``RequestOption``; the
/// ``RetryMiddleware`` loader's strategy is the default.
public struct RetryStrategy: Sendable, RequestOption {
    /// Attempts in all, the first included; 1 means never retry.
    public var maxAttempts: Int
    /// The backoff before the first retry; it doubles with each retry.
    public var baseDelay: Duration
    /// The longest backoff between two attempts.
    public var maxDelay: Duration
    /// The longest `Retry-After` honoured. A server that asks for more gets no retry:
    /// its response is returned at once rather than retried too early.
    public var maxRetryAfter: Duration
    /// "Full jitter": each backoff is random between zero and its exponential value,
    /// so clients that failed together do not retry together.
    public var jitter: Bool
    /// Methods that may be retried.
    public var methods: Set<HTTPRequest.Method>
    /// Statuses that are retried.
    public var statuses: Set<Int>
    /// Error codes that are retried. Never `cancelled` or `resetInProgress`, whatever
    /// this set says.
    public var errorCodes: Set<CatenaError.Code>

    /// A strategy; the defaults are ``standard``'s.
    public init(
        maxAttempts: Int = 3,
        baseDelay: Duration = .milliseconds(200),
        maxDelay: Duration = .seconds(10),
        maxRetryAfter: Duration = .seconds(60),
        jitter: Bool = true,
        methods: Set<HTTPRequest.Method> = [.get, .head, .options, .put, .delete],
        statuses: Set<Int> = [408, 429, 500, 502, 503, 504],
        errorCodes: Set<CatenaError.Code> = [.cannotConnect, .connectionLost, .timedOut]
    ) {
        self.maxAttempts = max(1, maxAttempts)
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
        self.maxRetryAfter = maxRetryAfter
        self.jitter = jitter
        self.methods = methods
        self.statuses = statuses
        self.errorCodes = errorCodes
    }

    /// Whether this strategy's statuses and error codes call for another attempt after
    /// `error` (methods and attempt counts aside): for retries outside the loader chain,
    /// such as a retrying operation's. Never after `cancelled` or `resetInProgress`.
    public func retries(_ error: CatenaError) -> Bool {
        switch error.code {
        case .cancelled, .resetInProgress: false
        case .unacceptableStatus: error.response.map { statuses.contains($0.status.code) } ?? false
        default: errorCodes.contains(error.code)
        }
    }

    /// Three attempts of idempotent methods (GET, HEAD, OPTIONS, PUT, DELETE) on 408,
    /// 429, 500, 502, 503, 504 and on refused, lost or timed-out connections;
    /// exponential backoff from 200 ms with full jitter, at most 10 s; `Retry-After`
    /// up to 60 s.
    public static let standard = RetryStrategy()

    /// One attempt: no retry.
    public static let never = RetryStrategy(maxAttempts: 1)

    /// The option's default: `nil`, meaning "the chain's".
    public static let defaultValue: RetryStrategy? = nil

    /// The backoff before retry number `retry` (1 for the first retry), before jitter.
    func backoff(beforeRetry retry: Int) -> Duration {
        let exponent = min(retry - 1, 30)
        let delay = baseDelay * (1 << exponent)
        return min(delay, maxDelay)
    }
}

/// How many attempts a request took; set by ``RetryMiddleware`` on the response's request.
public enum RetryAttempt: RequestOption {
    public static let defaultValue = 1
}
