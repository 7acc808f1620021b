// Bodies as they arrive: chunks, server-sent events, JSON Lines, and an EventSource.
// Runs against the embedded demo server: `swift run --enable-all-traits Streaming`.

// snippet.hide
import CatenaDemoServer
import Foundation

let server = try await DemoServer.start()
let environment = ServerEnvironment(scheme: "http", host: "127.0.0.1", port: server.port)
// snippet.show
import Catena
import CatenaAsyncHTTPClient

let chain = EnvironmentMiddleware(environment) --> RetryMiddleware() --> AsyncHTTPClientTransport()

// snippet.chunks
// `stream` returns once the head has arrived; the body is read as it comes.
let bytes = try await chain.stream(try .get("api", "drip", query: .items(["chunks": "5", "interval": "0.05"])))
var count = 0
for try await chunk in bytes.body { count += chunk.count }  // leaving the loop cancels the call
print(bytes.status, count)
// snippet.end

// snippet.events
let events = try await chain.stream(try .get("api", "events", query: .items(["count": "3"])))
for try await event in events.serverSentEvents() {
    print(event.event, event.data)  // token token-1, token token-2, token token-3
}
// snippet.end

// snippet.lines
struct Row: Decodable, Sendable { let n: Int }

let export = try await chain.stream(try .get("api", "export.jsonl", query: .items(["count": "1000"])))
var total = 0
for try await row in export.jsonLines(of: Row.self) { total += row.n }  // one line at a time
print(total)
// snippet.end

// snippet.eventsource
// Reconnects after a dropped connection with Last-Event-ID, as a browser does.
let source = EventSource(try .get("api", "events", query: .items(["count": "6", "drop_after": "2", "end": "204"])), loader: chain)
for try await event in source {
    print(event.lastEventID, event.data)  // 1 to 6, across three connections
}
// snippet.end

// snippet.hide
await server.stop()
