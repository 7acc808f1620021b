// Spans, metrics, call events and per-phase timing.
// Runs against the embedded demo server: `swift run --enable-all-traits Observability`.

// snippet.hide
import CatenaDemoServer
import Foundation

let server = try await DemoServer.start()
let environment = ServerEnvironment(scheme: "http", host: "127.0.0.1", port: server.port)
// snippet.show
import Catena
import CatenaAsyncHTTPClient
import CatenaObservability

// snippet.chain
// At the head of the chain: spans through the tracer bootstrapped with
// InstrumentationSystem, metrics through the backend bootstrapped with MetricsSystem
// (without either, both cost next to nothing).
let chain =
    TracingMiddleware()
    --> MetricsMiddleware(hosts: .firstSeen(20))  // label cardinality stays bounded
    --> EnvironmentMiddleware(environment)
    --> RetryMiddleware()
    --> AsyncHTTPClientTransport()
// snippet.end

// snippet.events
// What happens inside a call, as the loaders report it: retries, resends, token
// refreshes, cache outcomes, response heads.
let events = Events()
var request = try APIRequest(
    .get, path: ["api", "flaky"], query: [URLQueryItem(name: "key", value: "snippet"), URLQueryItem(name: "failures", value: "2")])
request.observe(CallObserver { event in events.append(event) })
let response = try await chain.load(request)
print(response.status, events.all)  // 200 OK, after two 503 heads and two .retrying events
// snippet.end

// snippet.timing
if let timing = response.timing {
    print(timing.timeToFirstByte, timing.bodyDuration ?? .zero)
}
// snippet.end

// snippet.hide
/// A thread-safe list, as an observer may be called from any thread.
final class Events: Sendable {
    private let lock = NSLock()
    // Guarded by `lock`.
    nonisolated(unsafe) private var events: [CallEvent] = []
    func append(_ event: CallEvent) { lock.withLock { events.append(event) } }
    var all: [CallEvent] { lock.withLock { events } }
}
await server.stop()
