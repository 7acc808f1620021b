public import HTTPTypes

/// Sends a second attempt of an idempotent call when the first has no answer after a
/// delay, and takes whichever answers first, cancelling the other: it cuts the slow
/// tail of an origin's latency at the cost of a few extra calls.
///
/// Opt-in, and only for `methods` (GET, HEAD and OPTIONS by default). The delay is
/// fixed, or a percentile of the origin's observed time to an answer (the time to the
/// first attempt's answer, over the last 200 calls; until 20 are seen, the fallback).
/// Each hedge spends one retry from `budget`, and each answered call earns it its
/// share, so that hedging a slow origin cannot double its load: with the budget spent,
/// the call waits for its first attempt. An
/// attempt that fails while the other is still out waits for the other.
///
/// ``CallEvent/hedgeSent(after:)`` and ``CallEvent/hedgeWon`` report what happened. A
/// streamed call is hedged until a head arrives; the losing attempt's body is cancelled.
public struct HedgeMiddleware: HTTPMiddleware {
    /// When to send the second attempt.
    public enum Delay: Sendable, Hashable {
        /// After this long.
        case fixed(Duration)
        /// After the origin's `percentile` (0.95 for p95) time to an answer, or
        /// `otherwise` until enough calls are seen.
        case percentile(Double, otherwise: Duration)
    }

    /// When the second attempt goes.
    public let delay: Delay
    /// The methods that are hedged.
    public let methods: Set<HTTPRequest.Method>
    /// The budget each hedge spends from.
    public let budget: RetryBudget
    private let latencies: OriginTable<LatencyWindow>

    /// A hedging loader.
    ///
    /// - Parameters:
    ///   - delay: when the second attempt goes; by default at the origin's p95, 100 ms
    ///     until that is known.
    ///   - methods: the methods hedged; only idempotent ones belong here.
    ///   - budget: what hedges spend; share ``RetryMiddleware``'s.
    public init(
        after delay: Delay = .percentile(0.95, otherwise: .milliseconds(100)), methods: Set<HTTPRequest.Method> = [.get, .head, .options],
        budget: RetryBudget = RetryBudget()
    ) {
        self.delay = delay
        self.methods = methods
        self.budget = budget
        self.latencies = OriginTable { LatencyWindow() }
    }

    public func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        guard methods.contains(request.method), !request.isWebSocketUpgrade else { return try await next.load(request) }
        var request = request
        // Both attempts carry one Idempotency-Key: the server must see one operation.
        _ = try request.applyIdempotencyKey()
        let response = try await race(request, attempt: { await next.result(for: $0) }, discard: { _ in })
        return budget.recordSuccess(of: response)
    }

    public func stream(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> StreamedResponse {
        // A WebSocket upgrade is sent once: a hedge would open a second socket.
        guard methods.contains(request.method), !request.isWebSocketUpgrade else { return try await next.stream(request) }
        var request = request
        _ = try request.applyIdempotencyKey()
        let streamed = try await race(
            request,
            attempt: { attempt in
                do throws(CatenaError) {
                    return .success(try await next.stream(attempt))
                } catch {
                    return .failure(error)
                }
            },
            discard: { $0.body.cancel() })
        // A head is success enough: the budget counts answers, not bodies.
        var counted = streamed
        counted.request = budget.recordSuccess(of: streamed.head).request
        return counted
    }

    /// The delay before hedging a call to `request`'s origin now.
    public func currentDelay(for request: APIRequest) -> Duration {
        switch delay {
        case .fixed(let duration): return max(.zero, duration)
        case .percentile(let percentile, let otherwise):
            return origins(request) { $0.percentile(percentile) } ?? max(.zero, otherwise)
        }
    }

    private func origins<T>(_ request: APIRequest, _ body: (inout LatencyWindow) -> T) -> T {
        latencies.withState(request.originKey, body)
    }

    private enum Arrival<Value: Sendable>: Sendable {
        case answer(hedge: Bool, Result<Value, CatenaError>)
        case timer
    }

    private func race<Value: Sendable>(
        _ request: APIRequest, attempt: @escaping @Sendable (APIRequest) async -> Result<Value, CatenaError>,
        discard: @escaping @Sendable (Value) -> Void
    ) async throws(CatenaError) -> Value {
        let delay = currentDelay(for: request)
        let start = ContinuousClock.now
        let outcome = await withTaskGroup(of: Arrival<Value>.self, returning: Result<Value, CatenaError>.self) { group in
            group.addTask { .answer(hedge: false, await attempt(request)) }
            group.addTask {
                try? await Task.sleep(for: delay)
                return .timer
            }
            var outstanding = 1
            var hedged = false
            var firstAnswered = false
            var lastFailure: CatenaError?
            var winner: Result<Value, CatenaError>?
            while let arrival = await group.next() {
                switch arrival {
                case .timer:
                    guard winner == nil, outstanding == 1, !hedged, !Task.isCancelled else { continue }
                    guard budget.withdraw(for: request) else {
                        request.report(.retryBudgetExhausted)
                        continue
                    }
                    hedged = true
                    outstanding += 1
                    request.report(.hedgeSent(after: delay))
                    group.addTask { .answer(hedge: true, await attempt(request)) }
                case .answer(let hedge, let result):
                    outstanding -= 1
                    if winner != nil {
                        // Both answered: the later one is let go.
                        if case .success(let value) = result { discard(value) }
                        continue
                    }
                    if !hedge {
                        firstAnswered = true
                        record(request, ContinuousClock.now - start)
                    }
                    if case .failure(let error) = result, outstanding > 0 {
                        lastFailure = error
                        continue
                    }
                    if case .success = result, hedge {
                        request.report(.hedgeWon)
                        // The first attempt, cancelled now, would have taken at least this long.
                        if !firstAnswered { record(request, ContinuousClock.now - start) }
                    }
                    winner = result
                    group.cancelAll()
                }
            }
            return winner ?? .failure(lastFailure ?? CatenaError(.cancelled, request: request, detail: "cancelled while hedging"))
        }
        return try outcome.get()
    }

    private func record(_ request: APIRequest, _ elapsed: Duration) {
        origins(request) { $0.add(elapsed) }
    }
}

/// The last 200 times to an answer from one origin, and their percentile, recomputed
/// every 20 new samples.
struct LatencyWindow: OriginState {
    static let capacity = 200
    static let minimumSamples = 20
    private var samples: [Duration] = []
    private var next = 0
    private var added = 0
    private var cached: (percentile: Double, value: Duration)?

    var isIdle: Bool { true }

    mutating func add(_ sample: Duration) {
        if samples.count < Self.capacity {
            samples.append(sample)
        } else {
            samples[next] = sample
        }
        next = (next + 1) % Self.capacity
        added += 1
        if added % Self.minimumSamples == 0 { cached = nil }
    }

    mutating func percentile(_ percentile: Double) -> Duration? {
        guard samples.count >= Self.minimumSamples, percentile.isFinite else { return nil }
        if let cached, cached.percentile == percentile { return cached.value }
        let sorted = samples.sorted()
        let rank = Int((min(1, max(0, percentile)) * Double(sorted.count - 1)).rounded(.up))
        let value = sorted[rank]
        cached = (percentile, value)
        return value
    }
}
