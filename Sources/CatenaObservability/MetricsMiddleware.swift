#if Observability
public import Catena
public import CoreMetrics
import Foundation
import Metrics

/// Records each call in swift-metrics: its duration, the calls in flight, and what
/// happened inside (retries, resends, token refreshes, cache outcomes, bytes, and
/// what the health middleware did).
///
/// Put it at the head of the chain, next to ``TracingMiddleware``. What it records:
///
/// | Label | Kind | Dimensions |
/// |---|---|---|
/// | `http.client.request.duration` | timer | `http.request.method`, `http.response.status_class` (`2xx` … `5xx`, or `failed`), `server.address` |
/// | `http.client.active_requests` | meter | none |
/// | `catena.http.client.failures` | counter | `error.type` (the `CatenaError/Code`, as `cannot_connect`) |
/// | `catena.http.client.retries` | counter | none |
/// | `catena.http.client.resends` | counter | none |
/// | `catena.http.client.token_refreshes` | counter | `outcome` (`succeeded`, `failed`); refreshes, not calls that waited for one |
/// | `catena.http.client.cache` | counter | `outcome` (`hit`, `miss`, `revalidated`) |
/// | `catena.http.client.health` | counter | `event`: `paced`, `held` (a call waited for a quota or a `Retry-After`), `hold_started`, `budget_exhausted`, `circuit_open`, `circuit_half_open`, `circuit_closed`, `hedge_sent`, `hedge_won` |
/// | `catena.http.client.request_body_bytes` | counter | none |
/// | `catena.http.client.response_body_bytes` | counter | none |
/// | `catena.http.client.connections` | counter | `reused` (`true`, `false`); one per exchange whose transport sees its connection |
/// | `catena.http.client.connect.duration` | timer | none; a new connection's set-up (`ConnectionInfo.readyAfter`) |
/// | `catena.http.client.time_to_first_byte` | timer | none; one per exchange, to its response head |
///
/// A streamed call counts as in flight, and its duration runs, until its body ends.
/// Every label keeps one set of dimension names, as Prometheus requires. The
/// `server.address` values are bounded (see ``HostLabels``), so that a client that
/// talks to many hosts cannot explode the number of series.
public struct MetricsMiddleware: HTTPMiddleware {
    /// Which host names get a `server.address` value of their own; the others share
    /// `other`.
    public struct HostLabels: Sendable {
        enum Rule: Sendable {
            case firstSeen(Int)
            case only(Set<String>)
        }
        let rule: Rule

        /// The first `limit` distinct hosts seen, in order of first use.
        public static func firstSeen(_ limit: Int) -> HostLabels { HostLabels(rule: .firstSeen(max(0, limit))) }
        /// Exactly these hosts (compared lowercased).
        public static func only(_ hosts: Set<String>) -> HostLabels { HostLabels(rule: .only(Set(hosts.map { $0.lowercased() }))) }
        /// No host gets a value of its own.
        public static let none = HostLabels(rule: .firstSeen(0))
    }

    private let instruments: Instruments

    /// A metrics loader.
    ///
    /// - Parameters:
    ///   - factory: the backend; the default is the one bootstrapped with
    ///     `MetricsSystem.bootstrap`, read now: create the loader after bootstrapping.
    ///   - hosts: which hosts get a `server.address` value of their own; by default the
    ///     first 20 seen.
    public init(factory: any MetricsFactory = MetricsSystem.factory, hosts: HostLabels = .firstSeen(20)) {
        self.instruments = Instruments(factory: factory, hosts: hosts)
    }

    public func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        let instruments = self.instruments
        let start = ContinuousClock.now
        instruments.active.increment()
        defer { instruments.active.decrement() }
        do {
            let response = try await next.load(instruments.observing(request))
            instruments.finished(
                request: response.request, method: request.method.rawValue, status: response.status.code,
                bytes: response.body.count, after: ContinuousClock.now - start)
            return response
        } catch {
            instruments.failed(error, method: request.method.rawValue, after: ContinuousClock.now - start)
            throw error
        }
    }

    public func stream(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> StreamedResponse {
        let instruments = self.instruments
        let start = ContinuousClock.now
        instruments.active.increment()
        let streamed: StreamedResponse
        do {
            streamed = try await next.stream(instruments.observing(request))
        } catch {
            instruments.active.decrement()
            instruments.failed(error, method: request.method.rawValue, after: ContinuousClock.now - start)
            throw error
        }
        let method = request.method.rawValue, status = streamed.status.code, sent = streamed.request
        streamed.body.whenEnded { bytes, error in
            instruments.active.decrement()
            if let error {
                instruments.responseBytes.increment(by: bytes)
                instruments.failed(error, method: method, after: ContinuousClock.now - start)
            } else {
                instruments.finished(request: sent, method: method, status: status, bytes: bytes, after: ContinuousClock.now - start)
            }
        }
        return streamed
    }
}

/// The metric handles, made once per loader (durations once per dimension set).
private final class Instruments: Sendable {
    let factory: any MetricsFactory
    let hosts: MetricsMiddleware.HostLabels
    let active: Meter
    let retries: Counter
    let resends: Counter
    let requestBytes: Counter
    let responseBytes: Counter
    private let refreshes: [Bool: Counter]
    /// `catena.http.client.connections`, by whether the exchange reused one.
    private let connections: [Bool: Counter]
    /// The phases of an exchange: a new connection's set-up, and the wait for the head.
    private let connectDuration: Timer
    private let timeToFirstByte: Timer
    private let cache: [CallEvent.CacheOutcome: Counter]
    /// `catena.http.client.health`, by event.
    private let health: [String: Counter]
    private struct DurationKey: Hashable {
        let method: String, statusClass: String, host: String
    }
    private struct State {
        var durations: [DurationKey: Timer] = [:]
        var failures: [String: Counter] = [:]
        var seenHosts: Set<String> = []
    }
    private let state = Locked(State())
    /// More distinct methods or error codes than this share one series ("other"): a
    /// method is the caller's, but no set of labels grows without bound.
    private static let maximumSeries = 512

    init(factory: any MetricsFactory, hosts: MetricsMiddleware.HostLabels) {
        self.factory = factory
        self.hosts = hosts
        active = Meter(label: "http.client.active_requests", factory: factory)
        retries = Counter(label: "catena.http.client.retries", factory: factory)
        resends = Counter(label: "catena.http.client.resends", factory: factory)
        requestBytes = Counter(label: "catena.http.client.request_body_bytes", factory: factory)
        responseBytes = Counter(label: "catena.http.client.response_body_bytes", factory: factory)
        refreshes = [
            true: Counter(label: "catena.http.client.token_refreshes", dimensions: [("outcome", "succeeded")], factory: factory),
            false: Counter(label: "catena.http.client.token_refreshes", dimensions: [("outcome", "failed")], factory: factory),
        ]
        connections = [
            true: Counter(label: "catena.http.client.connections", dimensions: [("reused", "true")], factory: factory),
            false: Counter(label: "catena.http.client.connections", dimensions: [("reused", "false")], factory: factory),
        ]
        connectDuration = Timer(label: "catena.http.client.connect.duration", factory: factory)
        timeToFirstByte = Timer(label: "catena.http.client.time_to_first_byte", factory: factory)
        health = Dictionary(
            uniqueKeysWithValues: [
                "paced", "held", "hold_started", "budget_exhausted", "circuit_open", "circuit_half_open", "circuit_closed", "hedge_sent",
                "hedge_won",
            ].map { event in
                (event, Counter(label: "catena.http.client.health", dimensions: [("event", event)], factory: factory))
            })
        cache = Dictionary(
            uniqueKeysWithValues: CallEvent.CacheOutcome.allCases.map { outcome in
                (outcome, Counter(label: "catena.http.client.cache", dimensions: [("outcome", outcome.rawValue)], factory: factory))
            })
    }

    /// `request` reporting its events to these instruments.
    func observing(_ request: APIRequest) -> APIRequest {
        var request = request
        request.observe(
            CallObserver { [self] event in
                switch event {
                case .retrying: retries.increment()
                case .resent: resends.increment()
                case .tokenRefresh(let started, _, let succeeded): if started { refreshes[succeeded]?.increment() }
                case .cache(let outcome): cache[outcome]?.increment()
                case .bodySent(let bytes): requestBytes.increment(by: bytes)
                case .responseHead(_, let after): timeToFirstByte.record(duration: after)
                case .connection(let connection):
                    connections[connection.isReused]?.increment()
                    if let ready = connection.readyAfter { connectDuration.record(duration: ready) }
                case .rateLimitWait(_, let byRetryAfter): health[byRetryAfter ? "held" : "paced"]?.increment()
                case .rateLimitHold: health["hold_started"]?.increment()
                case .retryBudgetExhausted: health["budget_exhausted"]?.increment()
                case .circuit(let state): health["circuit_" + state.rawValue]?.increment()
                case .hedgeSent: health["hedge_sent"]?.increment()
                case .hedgeWon: health["hedge_won"]?.increment()
                }
            })
        return request
    }

    func finished(request: APIRequest, method: String, status: Int, bytes: Int, after duration: Duration) {
        responseBytes.increment(by: bytes)
        let statusClass = (100...599).contains(status) ? "\(status / 100)xx" : "other"
        timer(method: method, statusClass: statusClass, host: request.host).record(duration: duration)
    }

    func failed(_ error: CatenaError, method: String, after duration: Duration) {
        timer(method: method, statusClass: "failed", host: (error.response?.request ?? error.request).host).record(duration: duration)
        let type = error.code.label
        let counter = state.withLock { state -> Counter in
            let key = state.failures[type] != nil || state.failures.count < Self.maximumSeries ? type : "other"
            if let counter = state.failures[key] { return counter }
            let counter = Counter(label: "catena.http.client.failures", dimensions: [("error.type", key)], factory: factory)
            state.failures[key] = counter
            return counter
        }
        counter.increment()
    }

    private func timer(method: String, statusClass: String, host: String?) -> Timer {
        state.withLock { state -> Timer in
            let host = label(for: host, in: &state)
            var key = DurationKey(method: method, statusClass: statusClass, host: host)
            if let timer = state.durations[key] { return timer }
            if state.durations.count >= Self.maximumSeries { key = DurationKey(method: "other", statusClass: statusClass, host: host) }
            if let timer = state.durations[key] { return timer }
            let timer = Timer(
                label: "http.client.request.duration",
                dimensions: [
                    ("http.request.method", key.method), ("http.response.status_class", key.statusClass), ("server.address", key.host),
                ], factory: factory)
            state.durations[key] = timer
            return timer
        }
    }

    private func label(for host: String?, in state: inout State) -> String {
        guard let host = host?.lowercased(), !host.isEmpty else { return "other" }
        switch hosts.rule {
        case .only(let allowed):
            return allowed.contains(host) ? host : "other"
        case .firstSeen(let limit):
            if state.seenHosts.contains(host) { return host }
            guard state.seenHosts.count < limit else { return "other" }
            state.seenHosts.insert(host)
            return host
        }
    }
}
#endif  // Observability
