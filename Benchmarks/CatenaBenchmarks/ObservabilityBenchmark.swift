import AsyncHTTPClient
import Catena
import CatenaAsyncHTTPClient
import CatenaObservability
import Foundation
import Logging
import Metrics
import NIOPosix
import ReqresAPI
import Tracing

/// The cost of tracing and metrics: the same chain with and without
/// `TracingMiddleware --> MetricsMiddleware` in front, over one AsyncHTTPClient
/// transport, with the no-op backends a process has until it bootstraps others (the
/// goal: at least 0.97 of the plain chain), and with backends that do work on every
/// call (a tracer that keeps nothing but builds every span, a metrics backend that
/// counts into locked storage) to show what the loaders themselves cost.
func observabilityBenchmark(base: URL, settings: Settings) async throws {
    let quiet = Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() }
    let transport = AsyncHTTPClientTransport()
    let chain = EnvironmentMiddleware(ServerEnvironment(baseURL: base)!) --> LogMiddleware(logger: quiet) --> transport
    let noOp = TracingMiddleware() --> MetricsMiddleware(factory: NOOPMetricsHandler.instance) --> chain
    let working = TracingMiddleware(tracer: DiscardingTracer()) --> MetricsMiddleware(factory: CountingMetrics()) --> chain
    let request = try UserEndpoint(id: 2).makeRequest()
    let decoder = JSONDecoder()
    func variant(_ name: String, _ loader: some HTTPLoader) -> Variant {
        Variant(name: name) { decode in
            let response = try await loader.load(request).validateStatus()
            if decode { _ = try response.decode(SingleUser.self, decoder: decoder) }
        }
    }
    print("Observability: one AsyncHTTPClient transport, the chain alone and with TracingMiddleware --> MetricsMiddleware")
    try await compare(
        [
            [
                variant("chain (log + environment)", chain),
                variant("+ tracing + metrics, no-op backends", noOp),
                variant("+ tracing + metrics, working backends", working),
            ]
        ], settings: settings)
    try await transport.shutdown()
}

/// The cost of seeing each exchange's connection (`ConnectionInfo`): a transport over a
/// client without the watch's handler (a client passed in) against one over a client
/// with it, unobserved and with an observer counting the `connection` events (the goal:
/// at least 0.98 of the first). Both clients share one event loop of their own, so their
/// pools' connections are alike: on the two shared loops, where each pool's connections
/// landed decided a whole run (0.91 to 1.10 across runs).
func connectionViewBenchmark(base: URL, settings: Settings) async throws {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let plainClient = HTTPClient(eventLoopGroup: group, configuration: AsyncHTTPClientTransport.defaultConfiguration)
    let watchedClient = HTTPClient(eventLoopGroup: group, configuration: AsyncHTTPClientTransport.watching(AsyncHTTPClientTransport.defaultConfiguration))
    let unseen = AsyncHTTPClientTransport(client: plainClient, decodesCompression: true)
    let seen = AsyncHTTPClientTransport(watchedClient: watchedClient, decodesCompression: true, timeout: .seconds(60))
    let request = try APIRequest(.get, baseURL: base, path: ["api", "users", "2"])
    let counted = Locked(0)
    var observed = request
    observed.observe(CallObserver { event in if case .connection = event { counted.withLock { $0 += 1 } } })
    let decoder = JSONDecoder()
    func variant(_ name: String, _ transport: AsyncHTTPClientTransport, _ request: APIRequest) -> Variant {
        Variant(name: name) { decode in
            let response = try await transport.load(request).validateStatus()
            // The view is on where it should be, off where it should not.
            guard (response.timing?.connection != nil) == (transport === seen) else { throw BenchmarkError.status(0) }
            if decode { _ = try response.decode(SingleUser.self, decoder: decoder) }
        }
    }
    print("Connection view: a client without the watch's handler, then one with it; one event loop for both")
    try await compare(
        [
            [
                variant("transport, connection not seen", unseen, request),
                variant("Catena transport, connection seen, unobserved", seen, request),
                variant("Catena transport, connection seen, counting observer", seen, observed),
                // The first variant again: the noise between two runs of the same thing.
                variant("transport, connection not seen (again, as a control)", unseen, request),
            ]
        ], settings: settings)
    print("connection events counted: \(counted.withLock { $0 })")
    try await plainClient.shutdown()
    try await watchedClient.shutdown()
    try await group.shutdownGracefully()
}

/// A tracer that builds every span (attributes, events, status) and drops it when it
/// ends: the work a real tracer's span does, without an exporter.
private struct DiscardingTracer: Tracer {
    func startSpan<Instant: TracerInstant>(
        _ operationName: String, context: @autoclosure () -> InstrumentationContext, ofKind kind: SpanKind,
        at instant: @autoclosure () -> Instant, function: String, file fileID: String, line: UInt
    ) -> DiscardingSpan {
        DiscardingSpan(operationName: operationName, context: context())
    }
    func forceFlush() {}
    func inject<Carrier, Inject: Injector>(_ context: InstrumentationContext, into carrier: inout Carrier, using injector: Inject)
    where Carrier == Inject.Carrier {
        injector.inject("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", forKey: "traceparent", into: &carrier)
    }
    func extract<Carrier, Extract: Extractor>(_ carrier: Carrier, into context: inout InstrumentationContext, using extractor: Extract)
    where Carrier == Extract.Carrier {}
}

/// Keeps its attributes and events behind a lock until it ends. Safe to share:
/// every field is behind `state`'s lock.
private final class DiscardingSpan: Span, @unchecked Sendable {
    private struct State {
        var operationName: String
        var attributes = SpanAttributes()
        var events: [SpanEvent] = []
        var status: SpanStatus?
    }
    private let state: Locked<State>
    let context: InstrumentationContext

    init(operationName: String, context: InstrumentationContext) {
        self.state = Locked(State(operationName: operationName))
        self.context = context
    }

    var operationName: String {
        get { state.withLock { $0.operationName } }
        set { state.withLock { $0.operationName = newValue } }
    }
    var attributes: SpanAttributes {
        get { state.withLock { $0.attributes } }
        set { state.withLock { $0.attributes = newValue } }
    }
    var isRecording: Bool { true }
    func setStatus(_ status: SpanStatus) { state.withLock { $0.status = status } }
    func addEvent(_ event: SpanEvent) { state.withLock { $0.events.append(event) } }
    func recordError<Instant: TracerInstant>(_ error: any Error, attributes: SpanAttributes, at instant: @autoclosure () -> Instant) {}
    func addLink(_ link: SpanLink) {}
    func end<Instant: TracerInstant>(at instant: @autoclosure () -> Instant) {}
}

/// A metrics backend whose handlers add into locked storage, as a real one does.
private final class CountingMetrics: MetricsFactory {
    private final class Handler: CounterHandler, FloatingPointCounterHandler, MeterHandler, RecorderHandler, TimerHandler, Sendable {
        private let total = Locked<Double>(0)
        func increment(by amount: Int64) { total.withLock { $0 += Double(amount) } }
        func increment(by amount: Double) { total.withLock { $0 += amount } }
        func decrement(by amount: Double) { total.withLock { $0 -= amount } }
        func set(_ value: Int64) { total.withLock { $0 = Double(value) } }
        func set(_ value: Double) { total.withLock { $0 = value } }
        func record(_ value: Int64) { total.withLock { $0 += Double(value) } }
        func record(_ value: Double) { total.withLock { $0 += value } }
        func recordNanoseconds(_ duration: Int64) { total.withLock { $0 += Double(duration) } }
        func reset() { total.withLock { $0 = 0 } }
    }
    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler { Handler() }
    func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler { Handler() }
    func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler { Handler() }
    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler { Handler() }
    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler { Handler() }
    func destroyCounter(_ handler: any CounterHandler) {}
    func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {}
    func destroyMeter(_ handler: any MeterHandler) {}
    func destroyRecorder(_ handler: any RecorderHandler) {}
    func destroyTimer(_ handler: any TimerHandler) {}
}
