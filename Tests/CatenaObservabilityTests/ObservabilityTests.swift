import Catena
import CatenaAsyncHTTPClient
import CatenaObservability
import Foundation
import HTTPTypes
import InMemoryTracing
import MetricsTestKit
import Testing
import Tracing
@testable import CatenaTestSupport

/// An in-memory tracer that propagates W3C `traceparent`, as swift-otel does: its IDs
/// are hex of the right lengths, and `inject` writes `00-<trace>-<span>-01`.
struct TraceparentTracer: Tracer {
    let base = InMemoryTracer(
        idGenerator: .init(
            nextTraceID: { String(UInt64.random(in: 1...(.max)), radix: 16).leftPadded(16) + String(UInt64.random(in: 0...(.max)), radix: 16).leftPadded(16) },
            nextSpanID: { String(UInt64.random(in: 1...(.max)), radix: 16).leftPadded(16) }))

    func startSpan<Instant: TracerInstant>(
        _ operationName: String, context: @autoclosure () -> InstrumentationContext, ofKind kind: SpanKind,
        at instant: @autoclosure () -> Instant, function: String, file fileID: String, line: UInt
    ) -> InMemorySpan {
        base.startSpan(operationName, context: context(), ofKind: kind, at: instant(), function: function, file: fileID, line: line)
    }

    func forceFlush() {}

    func inject<Carrier, Inject: Injector>(_ context: InstrumentationContext, into carrier: inout Carrier, using injector: Inject)
    where Carrier == Inject.Carrier {
        guard let span = context.inMemorySpanContext else { return }
        injector.inject("00-\(span.traceID)-\(span.spanID)-01", forKey: "traceparent", into: &carrier)
    }

    func extract<Carrier, Extract: Extractor>(_ carrier: Carrier, into context: inout InstrumentationContext, using extractor: Extract)
    where Carrier == Extract.Carrier {}

    var finishedSpans: [FinishedInMemorySpan] { base.finishedSpans }
}

extension String {
    func leftPadded(_ width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}

/// Spans and span events: typed reads of their attributes.
protocol HasSpanAttributes {
    var attributes: SpanAttributes { get }
}

extension FinishedInMemorySpan: HasSpanAttributes {}
extension SpanEvent: HasSpanAttributes {}

extension HasSpanAttributes {
    func string(_ name: String) -> String? {
        if case .string(let value) = attributes.get(name) { return value }
        return nil
    }
    func int(_ name: String) -> Int64? {
        if case .int64(let value) = attributes.get(name) { return value }
        return nil
    }
    func bool(_ name: String) -> Bool? {
        if case .bool(let value) = attributes.get(name) { return value }
        return nil
    }
}

@Suite("Tracing")
struct TracingTests {
    @Test("one client span per call with the HTTP conventions, secrets redacted, and its context reaches the server", arguments: TransportKind.withHTTPS)
    func spanAndPropagation(kind: TransportKind) async throws {
        let tracer = InMemoryTracer()
        let chain = TracingMiddleware(tracer: tracer) --> (try await kind.chain())
        let echo = try await chain.load(
            try APIRequest(
                .get, path: ["api", "echo"],
                query: [
                    URLQueryItem(name: "api_key", value: "s3cret"), URLQueryItem(name: "page", value: "2"),
                ])
        ).decode(Echo.self)

        let span = try #require(tracer.finishedSpans.only)
        #expect(span.operationName == "GET")
        #expect(span.kind == .client)
        #expect(span.string("http.request.method") == "GET")
        #expect(span.int("http.response.status_code") == 200)
        let url = try #require(span.string("url.full"))
        #expect(url.hasSuffix("/api/echo?api_key=<redacted>&page=2"))
        #expect(!url.contains("s3cret"))
        #expect(span.string("server.address") == "127.0.0.1")
        #expect(span.int("server.port") == Int64(try #require(URL(string: url)?.port)))
        #expect(span.string("url.scheme") == (kind == .asyncHTTPClientHTTPS ? "https" : "http"))
        #expect(span.string("error.type") == nil)
        #expect(span.status == nil)
        #expect(span.int("http.request.resend_count") == nil)
        // The transport's phases: attributes on the span, the head as an event.
        #expect(try #require(span.int("catena.time_to_first_byte_ms")) >= 0)
        #expect(try #require(span.int("catena.body_duration_ms")) >= 0)
        #expect(span.events.filter { $0.name == "http.response.head" }.count == 1)
        // The connection, where the transport sees it (AsyncHTTPClient), in OpenTelemetry's names.
        let connections = span.events.filter { $0.name == "catena.connection" }
        if kind == .urlSession {
            #expect(connections.isEmpty && span.string("network.peer.address") == nil)
        } else {
            let connection = try #require(connections.only)
            #expect(span.string("network.peer.address") == "127.0.0.1")
            #expect(span.int("network.peer.port") == span.int("server.port"))
            #expect(span.string("network.protocol.version") == (kind == .asyncHTTPClientHTTPS ? "2" : "1.1"))
            #expect(connection.bool("catena.connection.reused") != nil)
            #expect(connection.string("tls.protocol.version") == (kind == .asyncHTTPClientHTTPS ? "1.3" : nil))
        }
        // The server received this span's context: it is the parent of the server's work.
        #expect(echo.header(InMemoryTracer.traceIDKey) == span.spanContext.traceID)
        #expect(echo.header(InMemoryTracer.spanIDKey) == span.spanContext.spanID)
    }

    @Test("W3C traceparent through the task's tracer (withTracer), the span nested under the caller's", arguments: TransportKind.allCases)
    func traceparent(kind: TransportKind) async throws {
        let tracer = TraceparentTracer()
        let chain = TracingMiddleware() --> (try await kind.chain())
        let echo = try await withTracer(tracer) {
            try await withSpan("checkout") { _ in
                try await chain.load(try APIRequest(.get, path: ["api", "echo"])).decode(Echo.self)
            }
        }
        let spans = tracer.finishedSpans
        let client = try #require(spans.first { $0.kind == .client })
        let parent = try #require(spans.first { $0.operationName == "checkout" })
        #expect(client.spanContext.parentSpanID == parent.spanContext.spanID)
        #expect(client.spanContext.traceID == parent.spanContext.traceID)
        let header = try #require(echo.header("traceparent"))
        #expect(header == "00-\(client.spanContext.traceID)-\(client.spanContext.spanID)-01")
        #expect(header.count == 55)
    }

    @Test("each retry is a span event; the resend count is on the span", arguments: TransportKind.allCases)
    func retries(kind: TransportKind) async throws {
        let tracer = InMemoryTracer()
        let clock = VirtualClock()
        let chain =
            TracingMiddleware(tracer: tracer) --> EnvironmentMiddleware(try await TestServer.environment())
            --> RetryMiddleware(RetryStrategy(jitter: false), clock: clock) --> kind.make()
        let response = try await chain.load(
            try APIRequest(
                .get, path: ["api", "flaky"],
                query: [
                    URLQueryItem(name: "key", value: uniqueKey()), URLQueryItem(name: "failures", value: "2"),
                ]))
        #expect(response.status == .ok)
        let span = try #require(tracer.finishedSpans.only)
        #expect(span.int("http.request.resend_count") == 2)
        let retries = span.events.filter { $0.name == "http.retry" }
        #expect(retries.map { $0.int("http.request.resend_count") } == [1, 2])
        #expect(retries.map { $0.string("catena.retry.reason") } == ["503", "503"])
        #expect(
            retries.map { $0.int("catena.retry.delay_ms") }
                == clock.waits.map { Int64($0.components.seconds * 1000 + $0.components.attoseconds / 1_000_000_000_000_000) })
        #expect(span.status == nil, "the call succeeded in the end")
    }

    @Test("a token refresh is a span event of the call that waited for it", arguments: TransportKind.allCases)
    func tokenRefresh(kind: TransportKind) async throws {
        let tracer = InMemoryTracer()
        let base = try await TestServer.running().baseURL
        let client = OAuth2Client(
            clientID: "catena-service", authentication: .clientSecretBasic("catena-service-secret"),
            endpoints: .init(token: base.appending(path: "oauth/token")), loader: kind.make())
        let auth = TokenAuthMiddleware(hosts: [try await TestServer.authority()], client: client, signIn: .clientCredentials())
        let chain = TracingMiddleware(tracer: tracer) --> EnvironmentMiddleware(try await TestServer.environment()) --> auth --> kind.make()
        #expect(try await chain.load(try APIRequest(.get, path: ["api", "protected", "me"])).status == .ok)
        #expect(try await chain.load(try APIRequest(.get, path: ["api", "protected", "me"])).status == .ok)

        let spans = tracer.finishedSpans
        #expect(spans.count == 2)
        let first = try #require(spans.first?.events.filter { $0.name == "catena.token_refresh" }.only)
        #expect(first.bool("catena.token_refresh.started") == true)
        #expect(first.bool("catena.token_refresh.succeeded") == true)
        #expect(try #require(first.int("catena.token_refresh.wait_ms")) >= 0)
        #expect(spans.last?.events.contains { $0.name == "catena.token_refresh" } == false, "the second call had a fresh token")
        // The header on the span is never recorded, token or not.
        for span in spans { #expect(!"\(span.attributes)".contains("Bearer")) }
    }

    @Test("failures: a 404 and a refused connection end the span with an error and its type", arguments: TransportKind.allCases)
    func failures(kind: TransportKind) async throws {
        let tracer = InMemoryTracer()
        let chain = TracingMiddleware(tracer: tracer) --> (try await kind.chain())
        #expect(try await chain.load(try APIRequest(.get, path: ["api", "status", "404"])).status == .notFound)
        let closed = TracingMiddleware(tracer: tracer) --> kind.make(timeout: .seconds(5))
        let port = try await TestServer.closedPort()
        await #expect(throws: CatenaError.self) { try await closed.load(try APIRequest(.get, urlString: "http://127.0.0.1:\(port)/api/echo")) }

        let spans = tracer.finishedSpans
        #expect(spans.count == 2)
        #expect(spans.first?.int("http.response.status_code") == 404)
        #expect(spans.first?.string("error.type") == "404")
        #expect(spans.first?.status?.code == .error)
        #expect(spans.last?.string("error.type") == "cannot_connect")
        #expect(spans.last?.status?.code == .error)
        #expect(spans.last?.int("server.port") == Int64(port))
    }

    @Test("a streamed call's span ends with its body, and counts the bytes", arguments: TransportKind.withHTTPS)
    func stream(kind: TransportKind) async throws {
        let tracer = InMemoryTracer()
        let chain = TracingMiddleware(tracer: tracer) --> (try await kind.chain())
        let streamed = try await chain.stream(try APIRequest(.get, path: ["api", "bytes", "100000"]))
        #expect(tracer.finishedSpans.isEmpty, "the head is here, the body is not read yet")
        #expect(tracer.activeSpans.count == 1)
        #expect(try await streamed.body.collect(upTo: 1 << 20).count == 100_000)
        let span = try #require(tracer.finishedSpans.only)
        #expect(span.int("http.response.body.size") == 100_000)
        #expect(span.int("http.response.status_code") == 200)
        #expect(span.events.contains { $0.name == "http.response.head" })
        #expect(span.int("catena.body_duration_ms") != nil, "the body's duration, measured when it ended")
    }

    @Test("the cache's decision is on the span: miss, then hit", arguments: TransportKind.allCases)
    func cache(kind: TransportKind) async throws {
        let tracer = InMemoryTracer()
        let chain = TracingMiddleware(tracer: tracer) --> EnvironmentMiddleware(try await TestServer.environment()) --> CacheMiddleware() --> kind.make()
        let request = try APIRequest(.get, path: ["api", "cache", uniqueKey()], query: [URLQueryItem(name: "max_age", value: "60")])
        _ = try await chain.load(request)
        _ = try await chain.load(request)
        #expect(tracer.finishedSpans.map { $0.string("catena.cache.outcome") } == ["miss", "hit"])
    }

    @Test("with no tracer bootstrapped the loader passes the request through untouched")
    func noOp() async throws {
        let chain = TracingMiddleware() --> (try await TransportKind.asyncHTTPClient.chain())
        let echo = try await chain.load(try APIRequest(.get, path: ["api", "echo"])).decode(Echo.self)
        #expect(echo.header("traceparent") == nil)
        #expect(echo.header(InMemoryTracer.traceIDKey) == nil)
    }
}

@Suite("Metrics")
struct MetricsTests {
    @Test("durations by method, status class and host; retries, cache, failures, bytes; nothing left in flight", arguments: TransportKind.allCases)
    func metrics(kind: TransportKind) async throws {
        let metrics = TestMetrics()
        let clock = VirtualClock()
        let env = try await TestServer.environment()
        let chain =
            MetricsMiddleware(factory: metrics) --> EnvironmentMiddleware(env) --> CacheMiddleware()
            --> RetryMiddleware(RetryStrategy(jitter: false), clock: clock) --> kind.make(timeout: Timing.stretch(.seconds(5)))
        let key = uniqueKey()
        #expect(
            try await chain.load(
                try APIRequest(
                    .get, path: ["api", "flaky"],
                    query: [
                        URLQueryItem(name: "key", value: key), URLQueryItem(name: "failures", value: "2"),
                    ])
            ).status == .ok)
        let cached = try APIRequest(
            .get, path: ["api", "cache", key], query: [URLQueryItem(name: "max_age", value: "60"), URLQueryItem(name: "size", value: "1000")])
        _ = try await chain.load(cached)
        _ = try await chain.load(cached)
        #expect(try await chain.load(try APIRequest(.get, path: ["api", "status", "404"])).status == .notFound)
        #expect(try await chain.load(try APIRequest(.post, path: ["api", "echo"], body: .data(Data(count: 1234)))).status == .ok)
        let port = try await TestServer.closedPort()
        await #expect(throws: CatenaError.self) { try await chain.load(try APIRequest(.get, urlString: "http://127.0.0.1:\(port)/")) }

        let duration = "http.client.request.duration"
        let get2xx = try metrics.expectTimer(
            duration, [("http.request.method", "GET"), ("http.response.status_class", "2xx"), ("server.address", "127.0.0.1")])
        #expect(get2xx.values.count == 3, "the flaky call once (its attempts are one call) and the cached one twice")
        #expect(get2xx.values.allSatisfy { $0 >= 0 })
        #expect(
            try metrics.expectTimer(duration, [("http.request.method", "GET"), ("http.response.status_class", "4xx"), ("server.address", "127.0.0.1")]).values
                .count == 1)
        #expect(
            try metrics.expectTimer(duration, [("http.request.method", "POST"), ("http.response.status_class", "2xx"), ("server.address", "127.0.0.1")]).values
                .count == 1)
        #expect(
            try metrics.expectTimer(duration, [("http.request.method", "GET"), ("http.response.status_class", "failed"), ("server.address", "127.0.0.1")])
                .values.count == 1)
        #expect(try metrics.expectCounter("catena.http.client.failures", [("error.type", "cannot_connect")]).totalValue == 1)
        #expect(try metrics.expectCounter("catena.http.client.retries").totalValue == 4, "two for the flaky call, two for the refused connection")
        #expect(try metrics.expectCounter("catena.http.client.cache", [("outcome", "miss")]).totalValue == 4, "flaky, the first cached call, 404, refused")
        #expect(try metrics.expectCounter("catena.http.client.cache", [("outcome", "hit")]).totalValue == 1)
        #expect(try metrics.expectCounter("catena.http.client.request_body_bytes").totalValue == 1234)
        #expect(try metrics.expectCounter("catena.http.client.response_body_bytes").totalValue >= 2000)
        let active = try metrics.expectMeter("http.client.active_requests")
        #expect(active.lastValue == 0)
        #expect(active.values.max() == 1)
        // The exchanges' phases: the flaky call's three, the first cached call, the 404 and the POST.
        #expect(try metrics.expectTimer("catena.http.client.time_to_first_byte").values.count == 6)
        if kind == .asyncHTTPClient {
            let opened = (try? metrics.expectCounter("catena.http.client.connections", [("reused", "false")]).totalValue) ?? 0
            let reused = (try? metrics.expectCounter("catena.http.client.connections", [("reused", "true")]).totalValue) ?? 0
            #expect(opened + reused == 6)
            #expect(Int64((try? metrics.expectTimer("catena.http.client.connect.duration").values.count) ?? 0) <= opened)
        } else {
            #expect((try? metrics.expectCounter("catena.http.client.connections", [("reused", "false")]).totalValue) ?? 0 == 0)
        }
    }

    @Test("token refreshes count refreshes, not the calls that waited for one")
    func refreshes() async throws {
        let metrics = TestMetrics()
        let base = try await TestServer.running().baseURL
        let client = OAuth2Client(
            clientID: "catena-service", authentication: .clientSecretBasic("catena-service-secret"),
            endpoints: .init(token: base.appending(path: "oauth/token")), loader: AsyncHTTPClientTransport.forTests())
        let auth = TokenAuthMiddleware(hosts: [try await TestServer.authority()], client: client, signIn: .clientCredentials())
        let chain =
            MetricsMiddleware(factory: metrics) --> EnvironmentMiddleware(try await TestServer.environment()) --> auth --> AsyncHTTPClientTransport.forTests()
        try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
            for _ in 0..<20 { group.addTask { try await chain.load(try APIRequest(.get, path: ["api", "protected", "me"])).status } }
            for try await status in group { #expect(status == .ok) }
        }
        #expect(try metrics.expectCounter("catena.http.client.token_refreshes", [("outcome", "succeeded")]).totalValue == Int64(auth.refreshCount))
        #expect(auth.refreshCount == 1)
    }

    @Test("host labels stay bounded: past the limit every host is 'other'")
    func boundedHosts() async throws {
        let metrics = TestMetrics()
        let port = try await TestServer.running().port
        let chain = MetricsMiddleware(factory: metrics, hosts: .firstSeen(1)) --> AsyncHTTPClientTransport.forTests()
        for host in ["127.0.0.1", "localhost", "127.0.0.1", "LOCALHOST"] {
            #expect(try await chain.load(try APIRequest(.get, urlString: "http://\(host):\(port)/api/echo")).status == .ok)
        }
        let hosts = metrics.timers(label: "http.client.request.duration").compactMap { $0.dimensions.first { $0.0 == "server.address" }?.1 }
        #expect(Set(hosts) == ["127.0.0.1", "other"])
        #expect(metrics.timers(label: "http.client.request.duration").map(\.values.count).reduce(0, +) == 4)
    }

    @Test("a streamed call is in flight until its body ends")
    func streamInFlight() async throws {
        let metrics = TestMetrics()
        let chain = MetricsMiddleware(factory: metrics) --> (try await TransportKind.asyncHTTPClient.chain())
        let streamed = try await chain.stream(try APIRequest(.get, path: ["api", "bytes", "50000"]))
        let active = try metrics.expectMeter("http.client.active_requests")
        #expect(active.lastValue == 1)
        #expect(try await streamed.body.collect(upTo: 1 << 20).count == 50_000)
        #expect(active.lastValue == 0)
        #expect(try metrics.expectCounter("catena.http.client.response_body_bytes").totalValue == 50_000)
    }
}

@Suite("Health events as metrics and span events")
struct HealthObservabilityTests {
    @Test("a Retry-After hold, a spent budget and a circuit that opens are counted and on the call's span", arguments: TransportKind.allCases)
    func healthEvents(kind: TransportKind) async throws {
        let metrics = TestMetrics()
        let tracer = InMemoryTracer()
        let key = UUID().uuidString
        let chain =
            TracingMiddleware(tracer: tracer) --> MetricsMiddleware(factory: metrics)
            --> EnvironmentMiddleware(try await TestServer.environment())
            --> RetryMiddleware(RetryStrategy(maxAttempts: 2), budget: RetryBudget(ratio: 0, minimumPerSecond: 0))
            --> CircuitBreakerMiddleware(.init(consecutiveFailures: 1)) --> RateLimitMiddleware(maxHold: .seconds(1)) --> kind.make()
        let request = try APIRequest(
            .get, path: ["api", "outage"], query: [.init(name: "key", value: key), .init(name: "fail", value: "600"), .init(name: "retry-after", value: "5")])
        #expect(try await chain.load(request).status == .serviceUnavailable)
        for event in ["hold_started", "budget_exhausted", "circuit_open"] {
            #expect(try metrics.expectCounter("catena.http.client.health", [("event", event)]).totalValue == 1, "\(event)")
        }
        let span = try #require(tracer.finishedSpans.only)
        let names = span.events.map(\.name)
        #expect(names.contains("catena.rate_limit.hold"))
        #expect(names.contains("catena.retry_budget.exhausted"))
        #expect(span.events.first { $0.name == "catena.circuit" }?.attributes.get("catena.circuit.state") == .string("open"))
    }
}

extension Array {
    /// The one element, or nil when there are none or several.
    var only: Element? { count == 1 ? first : nil }
}
