import Catena
import Foundation

/// When a ``RetryingOperation`` tries again, and how long it waits first.
public struct OperationRetryStrategy: Sendable {
    /// How many attempts at most, the first one included (at least 1).
    public let maxAttempts: Int
    /// The wait before attempt `n + 1`, given the number `n` of attempts made so far.
    public let delay: @Sendable (_ attemptsMade: Int) -> Duration
    /// Whether an error is worth another attempt.
    public let shouldRetry: @Sendable (any Error) -> Bool

    /// A strategy with every part spelled out.
    public init(
        maxAttempts: Int,
        delay: @escaping @Sendable (_ attemptsMade: Int) -> Duration = { _ in .zero },
        shouldRetry: @escaping @Sendable (any Error) -> Bool = { !OperationError.isCancellation($0) }
    ) {
        self.maxAttempts = max(1, maxAttempts)
        self.delay = delay
        self.shouldRetry = shouldRetry
    }

    /// True for the HTTP failures worth another attempt: statuses 408, 429, 500, 502,
    /// 503, 504 and refused, lost or timed-out connections (`Catena/RetryStrategy/standard`'s
    /// rule). Pass it as a strategy's `if:`.
    public static let transientHTTPFailure: @Sendable (any Error) -> Bool = { error in
        (error as? CatenaError).map(RetryStrategy.standard.retries) ?? false
    }

    /// One attempt, no retry.
    public static let none = OperationRetryStrategy(maxAttempts: 1)

    /// Up to `times` attempts in all (PeakOperation's `repeat(times:)`), one straight after
    /// the other, while `shouldRetry` says the error is worth it.
    public static func `repeat`(
        times: Int,
        if shouldRetry: @escaping @Sendable (any Error) -> Bool = { !OperationError.isCancellation($0) }
    ) -> OperationRetryStrategy {
        OperationRetryStrategy(maxAttempts: times, shouldRetry: shouldRetry)
    }

    /// Up to `maxAttempts` attempts in all, waiting `delay` between them.
    public static func backoff(
        maxAttempts: Int,
        delay: Backoff,
        if shouldRetry: @escaping @Sendable (any Error) -> Bool = { !OperationError.isCancellation($0) }
    ) -> OperationRetryStrategy {
        OperationRetryStrategy(maxAttempts: maxAttempts, delay: delay.wait(after:), shouldRetry: shouldRetry)
    }

    /// A wait between attempts.
    public enum Backoff: Sendable {
        /// The same wait every time.
        case constant(Duration)
        /// `initial`, doubling after each attempt up to `maximum`; with `jitter`, a
        /// random wait between zero and that ("full jitter"), so that many clients
        /// failing together do not retry together.
        case exponential(initial: Duration, maximum: Duration, jitter: Bool = true)

        /// The wait after `attemptsMade` attempts.
        public func wait(after attemptsMade: Int) -> Duration {
            switch self {
            case .constant(let wait):
                return wait
            case .exponential(let initial, let maximum, let jitter):
                let factor = Double(1 << min(max(attemptsMade - 1, 0), 30))
                let capped = min(initial * factor, maximum)
                guard jitter else { return capped }
                let seconds = Double(capped.components.seconds) + Double(capped.components.attoseconds) / 1e18
                return .seconds(Double.random(in: 0...max(seconds, 0)))
            }
        }
    }
}

/// Runs a fresh operation for each attempt until one succeeds or the strategy says
/// stop; produces the last attempt's result.
///
/// ```swift
/// let sizes = RetryingOperation(strategy: .backoff(maxAttempts: 3, delay: .exponential(initial: .milliseconds(20), maximum: .seconds(1)))) { _ in
///     EndpointOperation(client: client, endpoint: GetSizesEndpoint(photoID: id))
/// }
/// ```
///
/// Cancelling it cancels the attempt in flight (or the wait) and starts no other.
///
/// An attempt that sent a request that is not idempotent by its method (POST, PATCH) is
/// made again only when that request carried an `Idempotency-Key` the next attempt
/// carries too, whatever failed and whatever the strategy says: a fixed
/// `IdempotencyKey`, or a generated one, which the first generated request of every
/// attempt that starts its requests when it starts (a `TaskOperation`,
/// `EndpointOperation` or `RequestOperation`) shares. Without one, the server could not
/// tell the attempts apart and would apply the call twice. The transports note what
/// each attempt sends, redirects included.
public final class RetryingOperation<Output: Sendable>: ResultOperation<Output>, @unchecked Sendable {
    // @unchecked Sendable: `strategy` and `makeAttempt` are immutable; the rest is in a lock.
    private let strategy: OperationRetryStrategy
    private let makeAttempt: @Sendable (_ attempt: Int) -> ResultOperation<Output>
    private let progressState = Locked(Attempts())
    /// The `Idempotency-Key` every attempt's generated request carries.
    private let key = UUID().uuidString.lowercased()

    /// What cancelling does, decided under the lock.
    private enum CancelStep {
        case cancel(ResultOperation<Output>)
        case endWait((any DispatchSourceTimer)?)
        case leaveToAttempt
    }

    // @unchecked Sendable: the wait's timer is touched only under the lock, or cancelled
    // once taken out of it, which dispatch sources allow from any thread.
    private struct Attempts: @unchecked Sendable {
        var made = 0
        /// The attempt in flight.
        var current: ResultOperation<Output>?
        /// The wait before the next attempt, while it lasts.
        var wait: (any DispatchSourceTimer)?
        /// True while `makeAttempt` makes the next attempt, outside the lock.
        var making = false
        /// Cancelled: no attempt starts from now on.
        var stopped = false
        /// What the attempt in flight, or the last one, sent.
        var sent: IdempotencyKey.Attempt?
    }

    /// A retrying operation; `makeAttempt` is given the attempt's number, from 1, and
    /// must return a new operation each time.
    public init(strategy: OperationRetryStrategy, makeAttempt: @escaping @Sendable (_ attempt: Int) -> ResultOperation<Output>) {
        self.strategy = strategy
        self.makeAttempt = makeAttempt
        super.init()
    }

    /// How many attempts have started.
    public var attempts: Int { progressState.withLock { $0.made } }

    public override func execute() {
        attempt()
    }

    public override func cancelled() {
        let next = progressState.withLock { state -> CancelStep in
            state.stopped = true
            if let current = state.current { return .cancel(current) }
            // An attempt being made is never started: `attempt()` finishes instead.
            if state.making { return .leaveToAttempt }
            defer { state.wait = nil }
            return .endWait(state.wait)
        }
        switch next {
        case .cancel(let current):
            current.cancel()
        case .endWait(let wait):
            // Cancelling the timer lets go of its handler, and with it this operation.
            wait?.cancel()
            // Not yet started: the queue's start finishes it (`execute()` finds it stopped).
            if isExecuting { finish() }
        case .leaveToAttempt:
            break
        }
    }

    private func attempt() {
        let number = progressState.withLock { state -> Int? in
            state.wait?.cancel()
            state.wait = nil
            guard !state.stopped, !isCancelled else { return nil }
            state.making = true
            return state.made + 1
        }
        guard let number else { return finish() }
        let operation = makeAttempt(number)
        let sent = IdempotencyKey.Attempt(key: key)
        let started = progressState.withLock { state -> Bool in
            state.making = false
            guard !state.stopped else { return false }
            state.made = number
            state.current = operation
            state.sent = sent
            return true
        }
        // Cancelled while the attempt was being made: it is never started.
        guard started else { return finish() }
        operation.addResultBlock { [self] result in attemptFinished(result) }
        // Bound while the attempt starts: the task it starts its requests in inherits it,
        // and the transports note in it what goes out.
        IdempotencyKey.$attempt.withValue(sent) { operation.start() }
    }

    private func attemptFinished(_ result: Result<Output, any Error>) {
        let (made, sent) = progressState.withLock { state -> (Int, IdempotencyKey.Attempt?) in
            state.current = nil
            return (state.made, state.sent)
        }
        // Whatever failed, and however: a POST or PATCH that went out without a key the
        // next attempt carries too is never sent again.
        let mayResend = sent?.mayResend ?? true
        guard case .failure(let error) = result, !isCancelled, made < strategy.maxAttempts, strategy.shouldRetry(error), mayResend else {
            return isCancelled ? finish() : finish(with: result)
        }
        let wait = strategy.delay(made)
        let seconds = Double(wait.components.seconds) + Double(wait.components.attoseconds) / 1e18
        // Always a hop: an attempt that fails at once must not recurse. A timer, not
        // `asyncAfter`: cancelling the operation cancels it, and lets go of the operation
        // at once rather than when the wait would have ended.
        // Made and started under the lock: a timer never started must not be released.
        let armed = progressState.withLock { state -> Bool in
            guard !state.stopped else { return false }
            let timer = DispatchSource.makeTimerSource(queue: .global())
            timer.schedule(deadline: .now() + max(seconds, 0))
            timer.setEventHandler { [self] in attempt() }
            state.wait = timer
            timer.resume()
            return true
        }
        // Cancelled since the attempt ended, and `cancelled()` found no wait to end.
        if !armed { finish() }
    }
}
