import Foundation
import HTTPTypes

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
