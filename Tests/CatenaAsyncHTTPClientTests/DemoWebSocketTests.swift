import CatenaDemoServer
import Foundation
import HTTPTypes
import Testing
@testable import Catena
@testable import CatenaAsyncHTTPClient
@testable import CatenaTestSupport

/// The demo server's WebSockets (Hummingbird's upgrade) through whole chains.
@Suite("WebSockets on the demo server", .serialized, .timeLimit(.minutes(3)))
struct DemoWebSocketTests {
    private func chain(_ server: RunningDemoServer, _ transport: any HTTPLoader = AsyncHTTPClientTransport()) throws -> any HTTPLoader {
        EnvironmentMiddleware(try #require(ServerEnvironment(baseURL: server.baseURL))) --> transport
    }

    @Test("an echo through the environment: a relative request opens the socket")
    func echo() async throws {
        let socket = try await chain(try await TestServer.withWebSockets()).webSocket(try APIRequest(.get, path: ["ws", "echo"]))
        try await socket.send(text: "ping?")
        try await socket.send(data: Data([0, 1, 2]))
        var iterator = socket.messages.makeAsyncIterator()
        #expect(try await iterator.next() == .text("ping?"))
        #expect(try await iterator.next() == .binary(Data([0, 1, 2])))
        await socket.close()
        #expect(socket.closeStatus?.code == .normalClosure)
    }

    @Test("a protected socket opens with a live token from the chain's auth; without one the upgrade is refused")
    func protectedEcho() async throws {
        let server = try await TestServer.withWebSockets()
        let transport = AsyncHTTPClientTransport()
        let client = OAuth2Client(clientID: "catena-tests", endpoints: .init(token: server.baseURL.appending(path: "oauth/token")), loader: transport)
        let auth = TokenAuthMiddleware(hosts: ["127.0.0.1:\(server.port)"]) { _ in
            try await client.requestToken([
                (name: "grant_type", value: "password"), (name: "username", value: "eve.holt@reqres.in"), (name: "password", value: "cityslicka"),
            ])
        }
        let chain = EnvironmentMiddleware(try #require(ServerEnvironment(baseURL: server.baseURL))) --> auth --> transport
        let socket = try await chain.webSocket(try APIRequest(.get, path: ["ws", "protected", "echo"]))
        #expect(auth.refreshCount == 1)
        try await socket.send(text: "signed in")
        var iterator = socket.messages.makeAsyncIterator()
        #expect(try await iterator.next() == .text("signed in"))
        await socket.close()

        // Hummingbird's upgrade refuses with an empty 400: it cannot answer 401 (the
        // renewal on 401 is tested against Python's websockets).
        let refused = await #expect(throws: CatenaError.self) {
            try await self.chain(server).webSocket(try APIRequest(.get, path: ["ws", "protected", "echo"]))
        }
        #expect(refused?.code == .unacceptableStatus)
        #expect(refused?.response?.status.code == 400)
    }

    @Test("a ticker pushes its feed and closes in order")
    func ticker() async throws {
        let socket = try await chain(try await TestServer.withWebSockets()).webSocket(
            try APIRequest(.get, path: ["ws", "ticker"], query: [URLQueryItem(name: "n", value: "25"), URLQueryItem(name: "ms", value: "5")]))
        var sequences: [Int] = []
        for try await message in socket.messages {
            guard case .text(let json) = message, let object = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any] else {
                Issue.record("not a JSON text message: \(message)")
                continue
            }
            sequences.append(object["seq"] as? Int ?? -1)
        }
        #expect(sequences == Array(0..<25))
        #expect(socket.closeStatus == WebSocketClose(code: .normalClosure, reason: "end of feed"))
    }

    @Test("a flood arrives whole to a reader that keeps up, then closes in order")
    func flood() async throws {
        let socket = try await chain(try await TestServer.withWebSockets()).webSocket(
            try APIRequest(.get, path: ["ws", "flood"], query: [URLQueryItem(name: "n", value: "300"), URLQueryItem(name: "size", value: "65536")]))
        var count = 0
        for try await message in socket.messages {
            #expect(message == .binary(Data(repeating: 0x2A, count: 65536)))
            count += 1
        }
        #expect(count == 300)
        #expect(socket.closeStatus == WebSocketClose(code: .normalClosure, reason: "end of flood"))
    }

    @Test("permessage-deflate with Hummingbird's extension: compressed and small messages both come back whole")
    func compressedEcho() async throws {
        var options = WebSocketOptions()
        options.compression = .deflate
        let socket = try await chain(try await TestServer.withWebSockets()).webSocket(try APIRequest(.get, path: ["ws", "echo"]), options: options)
        let agreed = try #require(socket.response.headerFields[HTTPField.Name("Sec-WebSocket-Extensions")!])
        #expect(agreed.hasPrefix("permessage-deflate"))
        // Hummingbird compresses messages of 256 bytes or more and sends smaller ones plain.
        let long = String(repeating: "catena compresses ", count: 4000)
        let binary = Data((0..<50_000).map { UInt8($0 % 251) })
        var iterator = socket.messages.makeAsyncIterator()
        for _ in 0..<3 {
            try await socket.send(text: long)
            try await socket.send(text: "short")
            try await socket.send(data: binary)
            #expect(try await iterator.next() == .text(long))
            #expect(try await iterator.next() == .text("short"))
            #expect(try await iterator.next() == .binary(binary))
        }
        await socket.close()
        #expect(socket.closeStatus?.code == .normalClosure)
    }

    @Test("a chat room: what one member says reaches every member")
    func chatRoom() async throws {
        let room = "room-\(UUID().uuidString.prefix(8))"
        let server = try await TestServer.withWebSockets()
        let ann = try await chain(server).webSocket(try APIRequest(.get, path: ["ws", "rooms", room]))
        let bob = try await chain(server).webSocket(try APIRequest(.get, path: ["ws", "rooms", room]))
        // Bob is in the room once his own hello comes back.
        try await bob.send(text: "bob here")
        var bobs = bob.messages.makeAsyncIterator()
        #expect(try await bobs.next() == .text("bob here"))
        try await ann.send(text: "hi all")
        #expect(try await bobs.next() == .text("hi all"))
        var anns = ann.messages.makeAsyncIterator()
        var heard: [WebSocketMessage] = []
        while heard.last != .text("hi all"), let message = try await anns.next() { heard.append(message) }
        #expect(heard.last == .text("hi all"))
        await ann.close()
        await bob.close()
    }

    @Test("over TLS (HTTP/1.1) with the server's key pinned, and over a Unix socket")
    func tlsAndUnixSocket() async throws {
        let certificate = try TLSServers.authority.get().issue()
        let server = try await DemoServer.start(tls: DemoTLS(certificate: certificate, http2: false), webSockets: true)
        let roots = try TLSServers.trust().additionalRoots
        let transport = try AsyncHTTPClientTransport(trust: ServerTrust(additionalRoots: roots, publicKeyPins: ["127.0.0.1": [certificate.publicKeySHA256]]))
        let socket = try await chain(server, transport).webSocket(try APIRequest(.get, path: ["ws", "echo"]))
        #expect(socket.response.request.scheme == "https")
        try await socket.send(text: "over tls")
        var iterator = socket.messages.makeAsyncIterator()
        #expect(try await iterator.next() == .text("over tls"))
        await socket.close()
        try await transport.shutdown()
        await server.stop()

        let path = FileManager.default.temporaryDirectory.appending(path: "catena-ws-\(UUID().uuidString.prefix(8)).sock").path
        let local = try await DemoServer.start(unixSocket: path, webSockets: true)
        var request = try APIRequest(urlString: "ws://localhost/ws/echo")
        request[option: UnixSocket.self] = path
        let overSocket = try await AsyncHTTPClientTransport().webSocket(request)
        try await overSocket.send(text: "local")
        var local1 = overSocket.messages.makeAsyncIterator()
        #expect(try await local1.next() == .text("local"))
        await overSocket.close()
        await local.stop()
    }
}
