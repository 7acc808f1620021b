import CatenaDemoServer
import Foundation
import HTTPTypes
import Testing
@testable import Catena
@testable import CatenaAsyncHTTPClient
@testable import CatenaTestSupport

private func compressed(_ compression: WebSocketCompression = .deflate) -> WebSocketOptions {
    var options = WebSocketOptions()
    options.compression = compression
    return options
}

/// permessage-deflate (RFC 7692) against Python's `websockets`, which implements it and
/// answers with its own window sizes.
@Suite("WebSocket compression against Python's websockets", .enabled(if: WebSocketServerProcess.testsRun), .serialized, .timeLimit(.minutes(3)))
struct IndependentWebSocketCompressionTests {
    static let server = Task { try await WebSocketServerProcess.start() }

    private func open(_ options: WebSocketOptions) async throws -> WebSocket {
        let server = try await Self.server.value
        return try await AsyncHTTPClientTransport().webSocket(try APIRequest(urlString: server.url("/extensions")), options: options)
    }

    /// Sends each of `messages` and expects it back, in order.
    private func echoes(_ messages: [WebSocketMessage], on socket: WebSocket) async throws {
        var iterator = socket.messages.makeAsyncIterator()
        let agreed = try await iterator.next()
        guard case .text(let extensions) = agreed else {
            Issue.record("no extensions message: \(String(describing: agreed))")
            return
        }
        #expect(extensions.contains("PerMessageDeflate"), "the server agreed to \(extensions)")
        for message in messages {
            try await socket.send(message)
            #expect(try await iterator.next() == message)
        }
        await socket.close()
        #expect(try await iterator.next() == nil)
        #expect(socket.closeStatus?.code == .normalClosure)
    }

    @Test("offered and agreed: large, repeated and empty messages go there and back compressed, each side keeping its window")
    func contextKept() async throws {
        let socket = try await open(compressed())
        let answer = try #require(socket.response.headerFields[.secWebSocketExtensions])
        #expect(answer.hasPrefix("permessage-deflate"))
        let repeated = String(repeating: "the same words again and again ", count: 10_000)
        let messages: [WebSocketMessage] = [
            .text(repeated), .text(repeated), .binary(randomData(100_000)), .text(""), .text(""), .text("héllo 👋"), .text("héllo 👋"),
        ]
        try await echoes(messages, on: socket)
    }

    @Test("without context takeover on either side: the server agrees to both, and every message stands alone")
    func noContextTakeover() async throws {
        let socket = try await open(compressed(WebSocketCompression(serverNoContextTakeover: true, clientNoContextTakeover: true)))
        let answer = try #require(socket.response.headerFields[.secWebSocketExtensions])
        #expect(answer.contains("server_no_context_takeover"))
        #expect(answer.contains("client_no_context_takeover"))
        let message = WebSocketMessage.text(String(repeating: "abc", count: 5_000))
        try await echoes([message, message, message], on: socket)
    }

    @Test("not offered, not agreed: the upgrade carries no offer and messages go uncompressed")
    func notOffered() async throws {
        let server = try await Self.server.value
        let socket = try await AsyncHTTPClientTransport().webSocket(try APIRequest(urlString: server.url("/headers")))
        var iterator = socket.messages.makeAsyncIterator()
        let headers = try #require(try await iterator.next())
        guard case .text(let json) = headers else {
            Issue.record("no headers message: \(headers)")
            return
        }
        #expect(!json.contains("sec-websocket-extensions"))
        #expect(socket.response.headerFields[.secWebSocketExtensions] == nil)
        await socket.close()
    }
}

/// A server that compresses hostile data: bounded by the message limit as it inflates.
@Suite("WebSocket compression against a misbehaving server", .serialized, .timeLimit(.minutes(3)))
struct HostileWebSocketCompressionTests {
    private func open(_ fault: MisbehavingServer.WebSocketFault, options: WebSocketOptions) async throws -> WebSocket {
        let server = try await FaultServer.running()
        var request = APIRequest(url: server.baseURL.appending(path: fault.rawValue))
        request[option: RequestTimeout.self] = .seconds(10)
        return try await AsyncHTTPClientTransport().webSocket(request, options: options)
    }

    @Test("a message that inflates past the limit closes the socket with 1009")
    func bomb() async throws {
        var options = compressed()
        options.maximumMessageSize = 1024 * 1024
        let socket = try await open(.deflateBomb, options: options)
        let (messages, error) = await drain(socket)
        #expect(messages.isEmpty)
        #expect(error?.code == .invalidResponse)
        #expect(error?.detail?.contains("inflates to over the limit") == true)
        #expect(socket.closeStatus?.code == .messageTooBig)
    }

    @Test("a compressed message that is no DEFLATE data closes the socket with 1007")
    func corrupt() async throws {
        let socket = try await open(.deflateCorrupt, options: compressed())
        let (_, error) = await drain(socket)
        #expect(error?.code == .invalidResponse)
        #expect(socket.closeStatus?.code == .invalidPayload)
    }

    @Test("a server that answers with permessage-deflate when none was offered fails the upgrade")
    func unoffered() async throws {
        let error = await #expect(throws: CatenaError.self) { try await open(.deflateBomb, options: WebSocketOptions()) }
        #expect(error?.code == .invalidResponse)
        #expect(error?.detail?.contains("none was offered") == true)
    }
}

/// A server that says everything with its 101 and leaves (Linux only: the fault corks
/// the bytes and the FIN into one segment with TCP_CORK).
@Suite("WebSockets: the whole conversation in the 101's burst", .serialized, .timeLimit(.minutes(3)))
struct WebSocketBurstTests {
    private func open(_ fault: MisbehavingServer.WebSocketFault) async throws -> WebSocket {
        let server = try await FaultServer.running()
        var request = APIRequest(url: server.baseURL.appending(path: fault.rawValue))
        request[option: RequestTimeout.self] = .seconds(10)
        return try await AsyncHTTPClientTransport().webSocket(request)
    }

    @Test("a 101, the whole conversation and the close in one burst, then the end: every message arrives, then the close")
    func burst() async throws {
        // The end comes in the same wake-up as the 101 (the fault corks it into one
        // segment); NIO's HTTP decoder drops the bytes after an upgrade once it has seen
        // the end. 20 rounds, as it was a race.
        for round in 0..<20 {
            let socket = try await open(.burst)
            let (messages, error) = await drain(socket)
            #expect(messages == [.text("one"), .text("two"), .text("three")], "round \(round)")
            #expect(error == nil, "round \(round)")
            #expect(socket.closeStatus?.code == .normalClosure, "round \(round)")
        }
    }
}

/// The negotiation's rules (RFC 7692 section 7.1) and the codec, without a connection.
@Suite("permessage-deflate: the server's answer and the zlib codec")
struct PerMessageDeflateTests {
    @Test("the offer names the client's window and the context rules asked")
    func offer() {
        #expect(PerMessageDeflate.offer(.deflate) == "permessage-deflate; client_max_window_bits")
        #expect(
            PerMessageDeflate.offer(WebSocketCompression(serverNoContextTakeover: true, clientNoContextTakeover: true))
                == "permessage-deflate; client_max_window_bits; server_no_context_takeover; client_no_context_takeover")
    }

    @Test("answers that fit the offer are read, parameter by parameter")
    func accepted() throws {
        let plain = try PerMessageDeflate.agreed("permessage-deflate", offered: .deflate).get()
        #expect(plain == PerMessageDeflate())
        let full = try PerMessageDeflate.agreed(
            "Permessage-Deflate; server_max_window_bits=10; client_max_window_bits=\"12\"; server_no_context_takeover; client_no_context_takeover",
            offered: .deflate
        ).get()
        #expect(full.serverMaxWindowBits == 10 && full.clientMaxWindowBits == 12)
        #expect(full.serverNoContextTakeover && full.clientNoContextTakeover)
        // Asked by the client, so kept whatever the answer says.
        let asked = try PerMessageDeflate.agreed("permessage-deflate", offered: WebSocketCompression(clientNoContextTakeover: true)).get()
        #expect(asked.clientNoContextTakeover)
    }

    @Test(
        "answers that do not fit fail the connection, each with its reason",
        arguments: [
            "x-webkit-deflate-frame", "permessage-deflate, permessage-deflate", "permessage-deflate; server_max_window_bits=16",
            "permessage-deflate; client_max_window_bits=7", "permessage-deflate; server_max_window_bits", "permessage-deflate; unknown=1",
            "permessage-deflate; server_no_context_takeover; server_no_context_takeover", "permessage-deflate; server_no_context_takeover=1",
            "permessage-deflate; client_max_window_bits=0012", "permessage-deflate; client_max_window_bits=08",
            "permessage-deflate; server_max_window_bits=+9",
        ])
    func refused(_ answer: String) {
        guard case .failure(let refusal) = PerMessageDeflate.agreed(answer, offered: .deflate) else {
            Issue.record("\(answer) was accepted")
            return
        }
        #expect(!refusal.detail.isEmpty)
    }

    @Test("a server that keeps its context after being asked not to is refused")
    func contextAsked() {
        let result = PerMessageDeflate.agreed("permessage-deflate", offered: WebSocketCompression(serverNoContextTakeover: true))
        guard case .failure(let refusal) = result else {
            Issue.record("accepted")
            return
        }
        #expect(refusal.detail.contains("server_no_context_takeover"))
    }

    @Test("random answers never trap, and what is accepted has windows of 8 to 15 bits (2,000 random cases)")
    func randomAnswers() {
        var generator = SystemRandomNumberGenerator()
        let pieces = [
            "permessage-deflate", ";", ",", "=", "\"", " ", "server_max_window_bits", "client_max_window_bits", "server_no_context_takeover",
            "client_no_context_takeover", "8", "15", "99", "-1", "é", "\u{1B}[31m", "",
        ]
        for _ in 0..<2_000 {
            let answer = (0..<Int.random(in: 0...10, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
            if case .success(let agreed) = PerMessageDeflate.agreed(answer, offered: .deflate) {
                #expect((8...15).contains(agreed.serverMaxWindowBits) && (8...15).contains(agreed.clientMaxWindowBits), "\(answer)")
            }
        }
    }

    @Test("any messages, deflated by one codec, inflate in another to what was sent, with and without context takeover (300 random cases)")
    func roundTrip() throws {
        for round in 0..<300 {
            var agreed = PerMessageDeflate()
            agreed.clientNoContextTakeover = round % 2 == 0
            agreed.serverNoContextTakeover = agreed.clientNoContextTakeover
            agreed.clientMaxWindowBits = Int.random(in: 9...15)
            let sender = try ZlibMessageCodec(agreed)
            let receiver = try ZlibMessageCodec(agreed)
            for _ in 0..<Int.random(in: 1...4) {
                // Empty ones often: one right after a flush once made zlib write nothing.
                let message: Data =
                    switch Int.random(in: 0..<3) {
                    case 0: randomData(Int.random(in: 1...70_000))
                    case 1: Data(String(repeating: "words ", count: Int.random(in: 0...20_000)).utf8)
                    default: Data()
                    }
                let wire = sender.deflate(message) { $0 }
                #expect(try receiver.inflate(wire, limit: message.count) == message, "round \(round)")
            }
        }
    }

    @Test("the limit holds for what a message inflates to: one byte under it is too big")
    func limit() throws {
        let codec = try ZlibMessageCodec(PerMessageDeflate())
        let message = Data(repeating: 0x61, count: 1 << 20)
        let wire = codec.deflate(message) { $0 }
        #expect(wire.count < 10_000)
        let other = try ZlibMessageCodec(PerMessageDeflate())
        #expect(throws: WebSocketInflateError.tooBig) { try other.inflate(wire, limit: message.count - 1) }
    }

    @Test("random bytes never trap the inflater: they inflate within the limit or are refused (500 random cases)")
    func randomBytes() throws {
        for _ in 0..<500 {
            let codec = try ZlibMessageCodec(PerMessageDeflate())
            let bytes = randomData(Int.random(in: 0...300))
            do {
                let inflated = try codec.inflate(bytes, limit: 4096)
                #expect(inflated.count <= 4096)
            } catch {
                #expect(error == .tooBig || { if case .corrupt = error { true } else { false } }())
            }
        }
    }

    @Test("a server asking for an 8-bit client window gets Huffman coding alone, which its window inflates")
    func eightBits() throws {
        var agreed = PerMessageDeflate()
        agreed.clientMaxWindowBits = 8
        let codec = try ZlibMessageCodec(agreed)
        let message = Data(String(repeating: "abcdefgh", count: 4_000).utf8)
        let wire = codec.deflate(message) { $0 }
        #expect(wire.count < message.count)
        // Python's zlib with an 8-bit window would refuse a distance past 256; none is made.
        let receiver = try ZlibMessageCodec(agreed)
        #expect(try receiver.inflate(wire, limit: message.count) == message)
    }

    @Test("a message cut short inside a DEFLATE block is corrupt, never a shorter message")
    func cutShort() throws {
        let message = Data(String(repeating: "a message that compresses into one long block; ", count: 400).utf8)
        let wire = try ZlibMessageCodec(PerMessageDeflate()).deflate(message) { $0 }
        for cut in [wire.count / 2, wire.count - 1] {
            let receiver = try ZlibMessageCodec(PerMessageDeflate())
            #expect(throws: WebSocketInflateError.self, "cut at \(cut) of \(wire.count)") { try receiver.inflate(wire.prefix(cut), limit: 1 << 20) }
        }
    }

    @Test("a server that ends a message with a final block keeps its window for the next (section 7.2.3)")
    func finalBlockKeepsWindow() throws {
        // "hello" in a final block, then a new stream that copies it from the window
        // (made by Python's zlib with zdict): without the window, "distance too far back".
        let first = Data([0xCB, 0x48, 0xCD, 0xC9, 0xC9, 0x07, 0x00])
        let codec = try ZlibMessageCodec(PerMessageDeflate())
        #expect(try codec.inflate(first, limit: 100) == Data("hello".utf8))
        let second = Data([0xCA, 0x00, 0x11, 0x00, 0x00])
        #expect(try codec.inflate(second, limit: 100) == Data("hello".utf8))
    }
}

/// What goes on the wire when compression was agreed: the session's frames, recorded.
@Suite("permessage-deflate: what the socket sends")
struct DeflatedFramesTests {
    /// A connection that keeps what is sent and receives nothing until closed.
    final class Recorder: WebSocketFrameTransport {
        let sent = Locked<[Catena.WebSocketFrame]>([])
        let closed = AsyncStream<Void>.makeStream()
        func receive() async throws(WebSocketTransportError) -> Catena.WebSocketFrame? {
            for await _ in closed.stream {}
            return nil
        }
        func enqueue(_ frame: Catena.WebSocketFrame) -> WebSocketWrite {
            sent.withLock { $0.append(frame) }
            return WebSocketWrite {}
        }
        func close() async { closed.continuation.finish() }
    }

    @Test("messages go out with RSV1 and compressed, control frames plain; the peer's codec reads them back in order")
    func compressedOnTheWire() async throws {
        let recorder = Recorder()
        let request = try APIRequest(urlString: "ws://api.example/feed")
        let socket = WebSocket(
            frames: recorder, response: APIResponse(status: .switchingProtocols, request: request), subprotocol: nil, options: WebSocketOptions(),
            codec: try ZlibMessageCodec(PerMessageDeflate()))
        let text = String(repeating: "compress me ", count: 1_000)
        try await socket.send(text: text)
        try await socket.send(text: text)
        try await socket.send(data: Data())
        await socket.close()
        let frames = recorder.sent.withLock { $0 }
        try #require(frames.count == 4)
        let peer = try ZlibMessageCodec(PerMessageDeflate())
        for (frame, expected) in zip(frames, [Data(text.utf8), Data(text.utf8), Data()]) {
            #expect(frame.reservedBits == 4)
            #expect(frame.payload.count < max(expected.count, 2))
            #expect(try peer.inflate(frame.payload, limit: 1 << 20) == expected)
        }
        // The second copy refers back to the first: the window was kept.
        #expect(frames[1].payload.count < frames[0].payload.count)
        #expect(frames[3].opcode == Catena.WebSocketFrame.Opcode.close.rawValue && frames[3].reservedBits == 0)
    }
}
