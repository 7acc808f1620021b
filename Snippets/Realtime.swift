// WebSockets through the chain: a chat room and a price feed on the demo server.
// Runs against the embedded demo server: `swift run --enable-all-traits Realtime`.

// snippet.hide
import CatenaDemoServer
import Foundation

let server = try await DemoServer.start(webSockets: true)
let environment = ServerEnvironment(scheme: "http", host: "127.0.0.1", port: server.port)
// snippet.show
import Catena
import CatenaAsyncHTTPClient

// The same chain as for calls: the upgrade goes through every middleware.
let chain = EnvironmentMiddleware(environment) --> AsyncHTTPClientTransport()

// snippet.chat
/// The next text message; leaving the loop leaves the socket open.
func nextText(_ socket: WebSocket) async throws -> String? {
    for try await message in socket.messages {
        if case .text(let text) = message { return text }
    }
    return nil  // the server closed the socket in order
}

let ann = try await chain.webSocket(try .get("ws", "rooms", "lobby"))
let bob = try await chain.webSocket(try .get("ws", "rooms", "lobby"))
try await bob.send(text: "bob joined")  // a room echoes to its sender too:
_ = try await nextText(bob)  // once Bob hears himself, both are in

try await ann.send(text: "hello, lobby")
print("bob heard:", try await nextText(bob) ?? "nothing")
await ann.close()
await bob.close()
// snippet.end

// snippet.feed
// A feed the server pushes; the loop ends when the server closes in order.
let feed = try await chain.webSocket(try .get("ws", "ticker", query: .items(["n": "3", "ms": "10"])))
for try await message in feed.messages {
    if case .text(let tick) = message { print(tick) }  // {"seq":0,"symbol":"CTN","price":…}
}
print(feed.closeStatus?.description ?? "open")  // 1000 (normal closure): end of feed
// snippet.end

// snippet.hide
await server.stop()
