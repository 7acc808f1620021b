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
// refreshes, cache outcomes, each exchange's connection and response head.
let events = Events()
var request = try APIRequest(
    .get, path: ["api", "flaky"], query: [URLQueryItem(name: "key", value: "snippet"), URLQueryItem(name: "failures", value: "2")])
request.observe(CallObserver { event in events.append(event) })
let response = try await chain.load(request)
print(response.status, events.all)  // 200 OK, after two 503 heads and two .retrying events, each with its .connection
// snippet.end

// snippet.timing
// A slow call, diagnosed: was the time spent opening a connection, sending, or waiting
// for the server? (The demo's /api/drip holds its head 0.3 s.)
let slow = try await chain.load(
    try APIRequest(.get, path: ["api", "drip"], query: [URLQueryItem(name: "delay", value: "0.3"), URLQueryItem(name: "chunks", value: "1")]))
if let timing = slow.timing {
    // AsyncHTTPClientTransport sees the connection; URLSession on Linux does not (nil).
    if let connection = timing.connection {
        let setUp = connection.readyAfter.map { "new, ready after \($0)" } ?? "reused"
        print("connection:", setUp, connection.remoteAddress ?? "-", "HTTP/\(connection.httpVersion)", connection.tlsVersion ?? "no TLS")
    }
    print("sent after", timing.requestSent ?? .zero, "· head after", timing.timeToFirstByte, "· body", timing.bodyDuration ?? .zero)
    // Here: a reused connection, sent within a millisecond, the head 0.3 s later: the server.
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
