public import Foundation
public import HTTPTypes

/// The clock retry waits on. Inject a virtual one in tests so they do not sleep.
public protocol RetryClock: Sendable {
    /// The current time, for `Retry-After` dates.
    func now() -> Date
    /// Waits; throws when the calling task is cancelled.
    func sleep(for duration: Duration) async throws
}

/// The real clock.
public struct SystemRetryClock: RetryClock {
    public init() {}
    public func now() -> Date { Date() }
    public func sleep(for duration: Duration) async throws { try await Task.sleep(for: duration) }
}

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

/// Retries failed requests by a ``RetryStrategy``: transport errors and statuses that
/// are safe to retry, for idempotent methods (and POST or PATCH with an
/// ``IdempotencyKey``), with exponential backoff, full jitter and `Retry-After`
/// (seconds or an HTTP date).
///
/// Every attempt goes down the rest of the chain afresh, so its body is produced anew.
/// A status that stays retryable after the last attempt is returned as the response
/// (a ``ValidationMiddleware`` loader above turns it into an error); an error is thrown. Waiting
/// ends at once when the calling task is cancelled.
public struct RetryMiddleware: HTTPMiddleware {
    /// The strategy for requests that do not set their own.
    public let strategy: RetryStrategy
    /// The budget retries are spent from, when there is one.
    public let budget: RetryBudget?
    private let clock: any RetryClock
    private let random: @Sendable (Double) -> Double

    /// A retry loader.
    ///
    /// - Parameters:
    ///   - strategy: which failures are retried, how often, and how long to wait.
    ///   - budget: limits retries to each origin to a share of its successful calls;
    ///     a retry it refuses ends the call (see ``RetryBudget``).
    ///   - clock: what to wait on; inject a virtual clock in tests.
    ///   - random: returns a value in `0...upperBound`; for jitter.
    public init(
        _ strategy: RetryStrategy = .standard, budget: RetryBudget? = nil, clock: any RetryClock = SystemRetryClock(),
        random: @escaping @Sendable (_ upperBound: Double) -> Double = { Double.random(in: 0...$0) }
    ) {
        self.strategy = strategy
        self.budget = budget
        self.clock = clock
        self.random = random
    }

    public func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        let strategy = request[option: RetryStrategy.self] ?? self.strategy
        // The call's one key, made before its first attempt and carried by all of them.
        var request = request
        let keyed = try request.applyIdempotencyKey() && IdempotencyKey.keyedMethods.contains(request.method)
        let idempotent = strategy.methods.contains(request.method)
        // A keyed call is retried only when the hop that failed still carried the key:
        // a 307 to another origin sent the POST there without it (the key never leaves
        // its origin), and sending the call again would apply it there twice.
        func retries(after hop: APIRequest) -> Bool {
            idempotent || (keyed && hop.headerFields[.idempotencyKey] != nil)
        }
        // A 409 means "still in progress" only after an attempt that may have left work
        // behind: one that reached the server and was retried (a timeout, a lost
        // connection, a 502 or 504 from a gateway while the origin works on); before
        // that, or after a refused connection or a 429, it is a conflict.
        var mayBeInProgress = false
        var attempt = 1
        while true {
            var attemptRequest = request
            attemptRequest[option: RetryAttempt.self] = attempt
            let delay: Duration
            let reason: CallEvent.Outcome
            do {
                let response = try await next.load(attemptRequest)
                guard retries(after: response.request),
                    let wait = self.delay(after: response, attempt: attempt, strategy: strategy, keyed: keyed && !idempotent && mayBeInProgress)
                else { return budget?.recordSuccess(of: response) ?? response }
                guard budget?.withdraw(for: response.request) ?? true else {
                    request.report(.retryBudgetExhausted)
                    return response
                }
                delay = wait
                reason = .status(response.status.code)
                if response.status.code != 429 { mayBeInProgress = true }
            } catch {
                let code = error.code
                let retryable =
                    retries(after: error.response?.request ?? error.request) && code != .cancelled && code != .resetInProgress
                    && (strategy.errorCodes.contains(code) || (code == .unacceptableStatus && error.response != nil))
                guard retryable else {
                    // A 4xx the chain below turned into an error is still an origin that answered.
                    if let budget, code == .unacceptableStatus, let response = error.response { _ = budget.recordSuccess(of: response) }
                    throw error
                }
                if code == .unacceptableStatus, let response = error.response {
                    guard
                        let wait = self.delay(after: response, attempt: attempt, strategy: strategy, keyed: keyed && !idempotent && mayBeInProgress)
                    else {
                        throw error
                    }
                    delay = wait
                    reason = .status(response.status.code)
                    if response.status.code != 429 { mayBeInProgress = true }
                } else {
                    guard attempt < strategy.maxAttempts else { throw error }
                    delay = backoff(beforeRetry: attempt, strategy: strategy)
                    reason = .error(code)
                    if code != .cannotConnect { mayBeInProgress = true }
                }
                guard budget?.withdraw(for: error.response?.request ?? error.request) ?? true else {
                    request.report(.retryBudgetExhausted)
                    throw CatenaError(
                        .retryBudgetExhausted, request: error.request, response: error.response, underlyingError: error,
                        detail: "not retried: the retry budget of \((error.response?.request ?? error.request).originName) is spent")
                }
            }
            request.report(.retrying(attempt: attempt + 1, delay: delay, after: reason))
            do {
                try await clock.sleep(for: delay)
            } catch {
                throw CatenaError(.cancelled, request: request, underlyingError: error, detail: "cancelled while waiting to retry")
            }
            attempt += 1
        }
    }

    /// The wait before retrying after `response`, or nil when it is not to be retried.
    /// A keyed call also retries 409, the answer to a key still in progress, once an
    /// earlier attempt may have left the server at work (`keyed` says so).
    private func delay(after response: APIResponse, attempt: Int, strategy: RetryStrategy, keyed: Bool) -> Duration? {
        let status = response.status.code
        guard attempt < strategy.maxAttempts, strategy.statuses.contains(status) || (keyed && status == 409) else { return nil }
        if let header = response.headerFields[.retryAfter], let retryAfter = Self.parseRetryAfter(header, now: clock.now()) {
            return retryAfter <= strategy.maxRetryAfter ? retryAfter : nil
        }
        return backoff(beforeRetry: attempt, strategy: strategy)
    }

    private func backoff(beforeRetry retry: Int, strategy: RetryStrategy) -> Duration {
        let ceiling = strategy.backoff(beforeRetry: retry)
        guard strategy.jitter else { return ceiling }
        let seconds = Double(ceiling.components.seconds) + Double(ceiling.components.attoseconds) / 1e18
        return .seconds(min(seconds, max(0, random(seconds))))
    }

    /// `Retry-After` as delay-seconds ("120") or an HTTP date; nil when malformed.
    static func parseRetryAfter(_ value: String, now: Date) -> Duration? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        if let seconds = Int(trimmed) { return seconds >= 0 ? .seconds(seconds) : nil }
        if let date = HTTPDate.parse(trimmed) {
            return .seconds(max(0, date.timeIntervalSince(now).rounded(.up)))
        }
        return nil
    }
}
