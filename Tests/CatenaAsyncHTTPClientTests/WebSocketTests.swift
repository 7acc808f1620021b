import CatenaDemoServer
import Foundation
import HTTPTypes
import Testing
@testable import Catena
@testable import CatenaAsyncHTTPClient
@testable import CatenaTestSupport

/// Opens `path` of the Python server through `chain` (plain AsyncHTTPClient by default).
private func open(
    _ server: WebSocketServerProcess, _ path: String, through chain: any HTTPLoader = AsyncHTTPClientTransport(),
    options: WebSocketOptions = WebSocketOptions()
) async throws -> WebSocket {
    try await chain.webSocket(try APIRequest(urlString: server.url(path)), options: options)
}

/// Against a WebSocket server the project did not write: Python's `websockets`.
@Suite("WebSockets against Python's websockets", .enabled(if: WebSocketServerProcess.testsRun), .serialized, .timeLimit(.minutes(3)))
struct IndependentWebSocketTests {
    static let server = Task { try await WebSocketServerProcess.start() }

    @Test("text and binary messages go there and back; the close handshake ends the loop")
    func echo() async throws {
        let server = try await Self.server.value
        var request = try APIRequest(urlString: server.url("/echo"))
        let reported = Locked<[ConnectionInfo]>([])
        request.observe(CallObserver { event in if case .connection(let connection) = event { reported.withLock { $0.append(connection) } } })
        let socket = try await AsyncHTTPClientTransport().webSocket(request)
        // Its own new connection, reported as a call's is (a call event, and on the response).
        let connection = try #require(reported.withLock { $0.first })
        #expect(reported.withLock { $0.count } == 1 && socket.response.timing?.connection == connection)
        #expect(!connection.isReused && connection.readyAfter != nil && connection.tlsVersion == nil)
        #expect(connection.remoteAddress == "127.0.0.1" && connection.remotePort == server.port && connection.httpVersion == "1.1")
        let payload = randomData(100_000)
        try await socket.send(text: "héllo 👋")
        try await socket.send(data: payload)
        var iterator = socket.messages.makeAsyncIterator()
        #expect(try await iterator.next() == .text("héllo 👋"))
        #expect(try await iterator.next() == .binary(payload))
        await socket.close()
        #expect(try await iterator.next() == nil)
        #expect(socket.closeStatus?.code == .normalClosure)
        await #expect(throws: CatenaError.self) { try await socket.send(text: "late") }
    }

    @Test("the server chooses among the subprotocols offered")
    func subprotocol() async throws {
        var options = WebSocketOptions()
        options.subprotocols = ["chat.v1", "chat.v2"]
        let socket = try await open(try await Self.server.value, "/chat", options: options)
        #expect(socket.subprotocol == "chat.v2")
        #expect(socket.response.status.code == 101)
        await socket.close()
        let plain = try await open(try await Self.server.value, "/chat")
        #expect(plain.subprotocol == nil)
        await plain.close()
    }

    @Test("a refused upgrade is its status, its challenge and its body; the chain's auth gets it through")
    func refusedUpgrade() async throws {
        let server = try await Self.server.value
        let error = await #expect(throws: CatenaError.self) { try await open(server, "/protected") }
        #expect(error?.code == .unacceptableStatus)
        #expect(error?.response?.status.code == 401)
        #expect(error?.response?.headerFields[.wwwAuthenticate]?.hasPrefix("Bearer") == true)
        let body = String(decoding: error?.response?.body ?? Data(), as: UTF8.self)
        #expect(body.contains("sign in first"))
        let chain = RequestModifierMiddleware { $0.headerFields[.authorization] = "Bearer letmein" } --> AsyncHTTPClientTransport()
        let socket = try await open(server, "/protected", through: chain)
        try await socket.send(text: "in")
        var iterator = socket.messages.makeAsyncIterator()
        #expect(try await iterator.next() == .text("in"))
        await socket.close()
    }

    @Test("a 401 at the upgrade renews the token once, as for a call, and the socket opens with the new one")
    func renewsOn401() async throws {
        let server = try await Self.server.value
        let auth = TokenAuthMiddleware(hosts: ["127.0.0.1:\(server.port)"], token: BearerToken(accessToken: "stale")) { _ in
            BearerToken(accessToken: "letmein")
        }
        let socket = try await open(server, "/protected", through: auth --> AsyncHTTPClientTransport())
        #expect(auth.refreshCount == 1)
        #expect(socket.response.request.headerFields[.authorization] == "Bearer letmein")
        await socket.close()
        // Not the server's origin: no token, and no renewal.
        let other = TokenAuthMiddleware(hosts: ["example.com"], token: BearerToken(accessToken: "letmein")) { _ in BearerToken(accessToken: "letmein") }
        let refused = await #expect(throws: CatenaError.self) { try await open(server, "/protected", through: other --> AsyncHTTPClientTransport()) }
        #expect(refused?.response?.status.code == 401)
        #expect(other.refreshCount == 0)
    }

    @Test("the upgrade carries the chain's fields, cookies on one line, and the host with its port")
    func upgradeFields() async throws {
        let server = try await Self.server.value
        let chain =
            RequestModifierMiddleware { request in
                request.headerFields.append(HTTPField(name: .cookie, value: "a=1"))
                request.headerFields.append(HTTPField(name: .cookie, value: "b=2"))
                request.headerFields[HTTPField.Name("X-Trace")!] = "t-1"
            } --> AsyncHTTPClientTransport()
        let socket = try await open(server, "/headers", through: chain)
        var iterator = socket.messages.makeAsyncIterator()
        guard case .text(let json) = try await iterator.next() else { Issue.record("no text message"); return }
        let fields = try JSONDecoder().decode([String: String].self, from: Data(json.utf8))
        #expect(fields["cookie"] == "a=1; b=2")
        #expect(fields["x-trace"] == "t-1")
        #expect(fields["host"] == "127.0.0.1:\(server.port)")
        #expect(fields["accept-encoding"] == nil)
        await socket.close()
    }

    @Test("a server's close with its own code fails the loop with that code and reason")
    func serverClose() async throws {
        let socket = try await open(try await Self.server.value, "/close?code=4001&reason=bye%20now")
        try await socket.send(text: "go")
        let (_, error) = await drain(socket)
        #expect(error?.code == .connectionLost)
        #expect((error?.underlyingError as? WebSocketClose) == WebSocketClose(code: WebSocketCloseCode(rawValue: 4001), reason: "bye now"))
        #expect(socket.closeStatus?.code.rawValue == 4001)
    }

    @Test("a feed of 500 messages arrives whole and in order, and its orderly close ends the loop")
    func ticker() async throws {
        let socket = try await open(try await Self.server.value, "/ticker?n=500&size=1024")
        let (messages, error) = await drain(socket)
        #expect(error == nil)
        #expect(messages.count == 500)
        #expect(messages.last == .text(String(repeating: ".", count: 1021) + "499"))
        #expect(socket.closeStatus == WebSocketClose(code: .normalClosure, reason: "done"))
    }

    @Test("a flood to a slow reader stays within the buffer: the socket stops reading")
    func backpressure() async throws {
        var options = WebSocketOptions()
        options.bufferedBytes = 256 * 1024
        let socket = try await open(try await Self.server.value, "/flood", options: options)
        var iterator = socket.messages.makeAsyncIterator()
        _ = try await iterator.next()
        var peak = 0
        for _ in 0..<20 {
            try await Task.sleep(for: .milliseconds(25))
            peak = max(peak, socket.owner.session.queue.bufferedBytes)
        }
        // The limit and the one message that crossed it.
        #expect(peak <= 256 * 1024 + 64 * 1024)
        #expect(peak > 0)
        for _ in 0..<50 { _ = try await iterator.next() }
        await socket.close()
    }

    @Test("through an HTTP proxy's CONNECT tunnel (tinyproxy)", .enabled(if: ProxyProcess.testsRun))
    func throughHTTPProxy() async throws {
        let server = try await Self.server.value
        let proxy = try await ProxyProcess.tinyproxy()
        defer { proxy.stop() }
        let settings = ProxySettings(http: .init(host: "127.0.0.1", port: proxy.port), https: nil)
        let transport = try AsyncHTTPClientTransport(trust: ServerTrust(), proxy: settings)
        defer { Task { try? await transport.shutdown() } }
        let socket = try await open(server, "/echo", through: transport)
        try await socket.send(text: "tunnelled")
        var iterator = socket.messages.makeAsyncIterator()
        #expect(try await iterator.next() == .text("tunnelled"))
        await socket.close()
        #expect(await proxy.eventuallyLogged(port: server.port))
    }

    @Test("through a SOCKS5 proxy (Dante)", .enabled(if: ProxyProcess.testsRun))
    func throughSOCKSProxy() async throws {
        let server = try await Self.server.value
        let proxy = try await ProxyProcess.dante()
        defer { proxy.stop() }
        let settings = ProxySettings(http: .init(kind: .socks5, host: "127.0.0.1", port: proxy.port), https: nil)
        let transport = try AsyncHTTPClientTransport(trust: ServerTrust(), proxy: settings)
        defer { Task { try? await transport.shutdown() } }
        let socket = try await open(server, "/echo", through: transport)
        try await socket.send(text: "socks")
        var iterator = socket.messages.makeAsyncIterator()
        #expect(try await iterator.next() == .text("socks"))
        await socket.close()
        #expect(await proxy.eventuallyLogged(port: server.port))
    }

    @Test("over TLS: the chain is verified and the key pinned; a wrong pin sends nothing")
    func overTLS() async throws {
        let certificate = try TLSServers.authority.get().issue()
        let server = try await WebSocketServerProcess.start(certificatePEM: certificate.certificatePEM, keyPEM: certificate.privateKeyPEM)
        defer { server.stop() }
        let roots = try TLSServers.trust().additionalRoots
        let pinned = try AsyncHTTPClientTransport(
            trust: ServerTrust(additionalRoots: roots, publicKeyPins: ["127.0.0.1": [certificate.publicKeySHA256]]))
        defer { Task { try? await pinned.shutdown() } }
        let socket = try await open(server, "/echo", through: pinned)
        let connection = try #require(socket.response.timing?.connection)
        #expect(!connection.isReused && connection.readyAfter != nil && connection.httpVersion == "1.1")
        #expect(connection.remoteAddress == "127.0.0.1" && connection.remotePort == server.port && connection.localPort != nil)
        #expect(connection.tlsVersion?.hasPrefix("TLSv1.") == true, "\(connection)")
        try await socket.send(text: "secret")
        var iterator = socket.messages.makeAsyncIterator()
        #expect(try await iterator.next() == .text("secret"))
        await socket.close()

        let wrong = try AsyncHTTPClientTransport(
            trust: ServerTrust(additionalRoots: roots, publicKeyPins: ["127.0.0.1": [Data(repeating: 7, count: 32).base64EncodedString()]]))
        defer { Task { try? await wrong.shutdown() } }
        let error = await #expect(throws: CatenaError.self) { try await open(server, "/echo", through: wrong) }
        #expect(error?.code == .untrustedServer)
        let untrusting = AsyncHTTPClientTransport(configuration: AsyncHTTPClientTransport.defaultConfiguration)
        defer { Task { try? await untrusting.shutdown() } }
        let refused = await #expect(throws: CatenaError.self) { try await open(server, "/echo", through: untrusting) }
        #expect(refused?.code == .untrustedServer)
    }

    @Test("a transport over an HTTPClient passed in refuses: its TLS and proxy settings cannot be read")
    func foreignClientRefuses() async throws {
        let error = await #expect(throws: CatenaError.self) {
            try await open(try await Self.server.value, "/echo", through: AsyncHTTPClientTransport.forTests())
        }
        #expect(error?.code == .invalidRequest)
        #expect(error?.detail?.contains("AsyncHTTPClientTransport(configuration:)") == true)
    }

    @Test("the socket is one stream to the chain: logged when it ends, closed by a reset")
    func socketAsStream() async throws {
        let logs = CapturedLogs()
        let chain = ResetGuardMiddleware() --> LogMiddleware(logger: logs.logger(level: .debug)) --> AsyncHTTPClientTransport()
        let socket = try await open(try await Self.server.value, "/echo", through: chain)
        try await socket.send(text: "one")
        var iterator = socket.messages.makeAsyncIterator()
        #expect(try await iterator.next() == .text("one"))
        await chain.reset()
        let error = await #expect(throws: CatenaError.self) { try await iterator.next() }
        #expect(error?.code == .cancelled)
        #expect(await Timing.eventually { socket.closeStatus != nil })
        let again = try await open(try await Self.server.value, "/echo", through: chain)
        #expect(logs.text.contains("← 101"))
        #expect(!logs.text.contains("✓"))
        await again.close()
        #expect(await Timing.eventually { logs.text.contains("✓ GET http://127.0.0.1") })
    }

    @Test("a reconnecting socket connects again after a server's restart (1012), runs onConnect each time, and ends on close")
    func reconnects() async throws {
        let server = try await Self.server.value
        let connects = Locked(0)
        let states = Locked<[String]>([])
        let socket = ReconnectingWebSocket(
            try APIRequest(urlString: server.url("/flaky?id=\(UUID().uuidString)")), loader: AsyncHTTPClientTransport(),
            policy: ReconnectPolicy(initialDelay: .milliseconds(20), minimumDelay: .milliseconds(10), maximumDelay: .milliseconds(200))
        ) { _ in
            connects.withLock { $0 += 1 }
        } onStateChange: { state in
            let name =
                switch state {
                case .connecting: "connecting"
                case .connected: "connected"
                case .waiting: "waiting"
                case .ended(let error): error == nil ? "ended" : "failed"
                }
            states.withLock { $0.append(name) }
        }
        var iterator = socket.messages.makeAsyncIterator()
        #expect(try await iterator.next() == .text("hello 1"))
        #expect(try await iterator.next() == .text("hello 2"))
        #expect(try await iterator.next() == .text("hello 3"))
        try await socket.send(.text("still here"))
        #expect(try await iterator.next() == .text("still here"))
        await socket.close()
        #expect(try await iterator.next() == nil)
        #expect(connects.withLock { $0 } == 3)
        #expect(states.withLock { $0 }.filter { $0 == "waiting" }.count == 2)
        #expect(states.withLock { $0 }.last == "ended")
    }

    @Test("a reconnecting socket does not reconnect after a refused upgrade (401)")
    func reconnectRefused() async throws {
        let server = try await Self.server.value
        let connects = Locked(0)
        let socket = ReconnectingWebSocket(try APIRequest(urlString: server.url("/protected")), loader: AsyncHTTPClientTransport()) { _ in
            connects.withLock { $0 += 1 }
        }
        var iterator = socket.messages.makeAsyncIterator()
        let error = await #expect(throws: CatenaError.self) { try await iterator.next() }
        #expect(error?.response?.status.code == 401)
        #expect(connects.withLock { $0 } == 0)
    }

    @Test("URLSessionTransport refuses a WebSocket, naming the transport that opens one")
    func urlSessionRefuses() async throws {
        let error = await #expect(throws: CatenaError.self) {
            try await URLSessionTransport().webSocket(try APIRequest(urlString: "ws://127.0.0.1:9/echo"))
        }
        #expect(error?.code == .invalidRequest)
        #expect(error?.detail?.contains("AsyncHTTPClientTransport") == true)
    }
}

/// Against the misbehaving server: every way a server can break RFC 6455 ends in a
/// clear error and a close code, with bounded memory and no hang.
@Suite("WebSockets against a misbehaving server", .serialized, .timeLimit(.minutes(3)))
struct HostileWebSocketTests {
    private static func open(_ fault: MisbehavingServer.WebSocketFault, options: WebSocketOptions = WebSocketOptions()) async throws -> WebSocket {
        let server = try await FaultServer.running()
        var request = APIRequest(url: server.baseURL.appending(path: fault.rawValue))
        request[option: RequestTimeout.self] = .seconds(10)
        return try await AsyncHTTPClientTransport().webSocket(request, options: options)
    }

    static let violations: [(MisbehavingServer.WebSocketFault, UInt16)] = [
        (.masked, 1002), (.reservedBits, 1002), (.unknownOpcode, 1002), (.strayContinuation, 1002), (.closeOneByte, 1002),
        (.fragmentedControl, 1002), (.longControl, 1002), (.invalidUTF8, 1007), (.oversizeFrame, 1009), (.oversizeMessage, 1009),
    ]

    @Test("a frame that breaks the protocol fails the loop and closes with the code that says why", arguments: violations)
    func violation(_ fault: MisbehavingServer.WebSocketFault, code: UInt16) async throws {
        var options = WebSocketOptions()
        options.maximumMessageSize = 1024 * 1024
        let socket = try await Self.open(fault, options: options)
        let (_, error) = await drain(socket)
        #expect(error?.code == .invalidResponse, "\(fault)")
        #expect(socket.closeStatus?.code.rawValue == code, "\(fault): \(String(describing: socket.closeStatus))")
    }

    @Test("a close frame without a code is an orderly end (1005), after the message before it")
    func closeWithoutCode() async throws {
        let socket = try await Self.open(.closeWithoutCode)
        let (messages, error) = await drain(socket)
        #expect(messages == [.text("hello")])
        #expect(error == nil)
        #expect(socket.closeStatus?.code == .noStatusReceived)
    }

    @Test("fragments with a ping between them make one message; the close ends the loop")
    func interleavedPing() async throws {
        let socket = try await Self.open(.interleavedPing)
        let (messages, error) = await drain(socket)
        #expect(messages == [.text("hello")])
        #expect(error == nil)
        #expect(socket.closeStatus?.code == .normalClosure)
    }

    @Test("an abnormal close is an error carrying the code, its reason escaped for a terminal")
    func abnormalClose() async throws {
        let socket = try await Self.open(.abnormalClose)
        let (_, error) = await drain(socket)
        #expect(error?.code == .connectionLost)
        #expect((error?.underlyingError as? WebSocketClose)?.code == .internalError)
        let text = String(describing: error)
        #expect(!text.unicodeScalars.contains("\u{1B}"))
        #expect(text.contains("boom"))
    }

    @Test("a connection that ends without a close frame is connectionLost (1006)")
    func abrupt() async throws {
        let socket = try await Self.open(.abrupt)
        let (_, error) = await drain(socket)
        #expect(error?.code == .connectionLost)
        #expect(socket.closeStatus?.code == .abnormalClosure)
    }

    @Test("a server that never answers a close is left after the close timeout")
    func neverCloses() async throws {
        var options = WebSocketOptions()
        options.closeTimeout = .milliseconds(300)
        let socket = try await Self.open(.neverCloses, options: options)
        await socket.close()
        #expect(socket.closeStatus != nil)
        let (_, error) = await drain(socket)
        #expect(error == nil)
    }

    @Test("a server that answers no ping is found dead")
    func deadPeer() async throws {
        var options = WebSocketOptions()
        options.pingInterval = .milliseconds(100)
        options.pongTimeout = .milliseconds(300)
        let socket = try await Self.open(.neverCloses, options: options)
        let (_, error) = await drain(socket)
        #expect(error?.code == .timedOut)
    }

    @Test("a 101 with a wrong Sec-WebSocket-Accept is no WebSocket")
    func badAccept() async throws {
        let error = await #expect(throws: CatenaError.self) { try await Self.open(.badAccept) }
        #expect(error?.code == .invalidResponse)
    }

    @Test("an upgrade nobody answers times out")
    func silentUpgrade() async throws {
        let server = try await FaultServer.running()
        var request = APIRequest(url: server.url(.silence))
        request[option: RequestTimeout.self] = .milliseconds(500)
        let error = await #expect(throws: CatenaError.self) { try await AsyncHTTPClientTransport().webSocket(request) }
        #expect(error?.code == .timedOut)
    }

    @Test("cancelling the reading task closes the socket with a close frame")
    func cancelledReader() async throws {
        let socket = try await Self.open(.neverCloses)
        let reader = Task { await drain(socket) }
        try await Task.sleep(for: .milliseconds(50))
        reader.cancel()
        let (_, error) = await reader.value
        #expect(error?.code == .cancelled)
        #expect(await Timing.eventually(within: .seconds(10)) { socket.owner.session.isClosing })
    }
}
