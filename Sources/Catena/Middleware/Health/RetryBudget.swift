import Foundation

/// A limit on the extra load retries put on each origin: at most `ratio` of its
/// successful calls in the last `window`, plus `minimumPerSecond`, so that a backend
/// that fails for everyone gets a little more traffic, not every caller's every retry
/// at once (a retry storm).
///
/// Share one budget between ``RetryMiddleware`` (`budget:`) and ``HedgeMiddleware``:
/// a retry and a hedge each spend one. Counts are kept per origin in ten buckets that
/// slide with the window; an origin's state is a few dozen bytes, and at most 1,024
/// origins are kept.
public final class RetryBudget: Sendable {
    /// The share of successful calls that may be retried (0.1: 10 % extra load).
    public let ratio: Double
    /// Retries allowed per second whatever the successes, so that a quiet origin can
    /// still be retried.
    public let minimumPerSecond: Double
    /// How far back successes and retries count.
    public let window: Duration
    private let clock: any RetryClock
    private let origins: OriginTable<BudgetState>

    /// A budget.
    ///
    /// - Parameters:
    ///   - ratio: retries allowed per successful call in the window.
    ///   - minimumPerSecond: retries allowed per second of the window on top.
    ///   - window: how far back calls count (at least 1 s).
    ///   - clock: the time source; inject a virtual clock in tests.
    public init(ratio: Double = 0.1, minimumPerSecond: Double = 1, window: Duration = .seconds(10), clock: any RetryClock = SystemRetryClock()) {
        // NaN is none; infinity, or anything past a million, is a million.
        self.ratio = ratio.isNaN ? 0 : min(max(0, ratio), 1e6)
        self.minimumPerSecond = minimumPerSecond.isNaN ? 0 : min(max(0, minimumPerSecond), 1e6)
        self.window = max(.seconds(1), window)
        self.clock = clock
        self.origins = OriginTable { BudgetState() }
    }

    /// Counts a successful call to `request`'s origin.
    public func recordSuccess(for request: APIRequest) {
        let bucket = bucket(at: clock.now())
        origins.withState(request.originKey) { $0.add(success: 1, retry: 0, bucket: bucket) }
    }

    /// Counts `response` as a success, unless a 5xx, a 408 or a 429 (answers a retry
    /// is for), or already counted by a middleware further down that shares this
    /// budget; returns it marked as counted.
    func recordSuccess(of response: APIResponse) -> APIResponse {
        let code = response.status.code
        guard code < 500, code != 429, code != 408, response.request[option: CountedBy.self] !== self else { return response }
        recordSuccess(for: response.request)
        var response = response
        response.request[option: CountedBy.self] = self
        return response
    }

    /// The budget that counted a response's success, so that ``RetryMiddleware`` and
    /// ``HedgeMiddleware`` sharing one count each call once.
    enum CountedBy: RequestOption {
        static let defaultValue: RetryBudget? = nil
    }

    /// Spends one retry on `request`'s origin; false, spending nothing, when none is left.
    public func withdraw(for request: APIRequest) -> Bool {
        let bucket = bucket(at: clock.now())
        let allowance = minimumPerSecond * window.seconds
        return origins.withState(request.originKey) { state in
            let (successes, retries) = state.totals(in: (bucket - BudgetState.buckets + 1)...bucket)
            guard Double(retries) + 1 <= allowance + ratio * Double(successes) else { return false }
            state.add(success: 0, retry: 1, bucket: bucket)
            return true
        }
    }

    /// The retries `request`'s origin may take now.
    public func available(for request: APIRequest) -> Int {
        let bucket = bucket(at: clock.now())
        let (successes, retries) = origins.withState(request.originKey) { $0.totals(in: (bucket - BudgetState.buckets + 1)...bucket) }
        let allowance = min(minimumPerSecond * window.seconds + ratio * Double(successes), 1e15)
        return max(0, Int(allowance.rounded(.down)) - retries)
    }

    /// Forgets every origin's counts.
    public func reset() {
        origins.forEach { $0 = BudgetState() }
    }

    private func bucket(at date: Date) -> Int64 {
        let length = window.seconds / Double(BudgetState.buckets)
        let index = (date.timeIntervalSinceReferenceDate / length).rounded(.down)
        return index.isFinite ? Int64(max(-9e18, min(9e18, index))) : 0
    }
}

/// One origin's successes and retries, in a ring of buckets.
struct BudgetState: OriginState {
    static let buckets: Int64 = 10
    private var index = [Int64](repeating: .min, count: Int(buckets))
    private var successes = [Int](repeating: 0, count: Int(buckets))
    private var retries = [Int](repeating: 0, count: Int(buckets))

    var isIdle: Bool { true }

    mutating func add(success: Int, retry: Int, bucket: Int64) {
        let slot = Int(((bucket % Self.buckets) + Self.buckets) % Self.buckets)
        if index[slot] != bucket {
            index[slot] = bucket
            successes[slot] = 0
            retries[slot] = 0
        }
        successes[slot] += success
        retries[slot] += retry
    }

    /// The counts of the buckets in `range`; a bucket from the future (the clock went
    /// back) counts as nothing.
    func totals(in range: ClosedRange<Int64>) -> (successes: Int, retries: Int) {
        var total = (successes: 0, retries: 0)
        for slot in 0..<Int(Self.buckets) where range.contains(index[slot]) {
            total.successes += successes[slot]
            total.retries += retries[slot]
        }
        return total
    }
}
