import CatenaAsyncHTTPClient
import CatenaDemoServer
import Foundation
import Testing
@testable import Catena
@testable import CatenaTesting
@testable import CatenaTestSupport

/// WebSockets recorded in HAR files as browsers record them, replayed offline, and scripted.
@Suite("WebSocket recordings and scripts", .serialized, .timeLimit(.minutes(3)))
struct WebSocketRecordingTests {
    @Test("a socket's messages are recorded, scrubbed like bodies, and replay offline in their order")
    func recordAndReplay() async throws {
        let server = try await TestServer.withWebSockets()
        let recorder = HARRecorder()
        let chain = recorder --> AsyncHTTPClientTransport()
        var request = try APIRequest(urlString: "ws://127.0.0.1:\(server.port)/ws/echo")
        request.headerFields[.authorization] = "Bearer sekrit-token-42"
        let socket = try await chain.webSocket(request)
        try await socket.send(text: #"{"password":"hunter2","text":"hi"}"#)
        try await socket.send(text: "my token is sekrit-token-42")
        var iterator = socket.messages.makeAsyncIterator()
        #expect(try await iterator.next() == .text(#"{"password":"hunter2","text":"hi"}"#))
        #expect(try await iterator.next() == .text("my token is sekrit-token-42"))
        await socket.close()

        let har = recorder.har
        let entry = try #require(har.log.entries.first)
        #expect(entry._resourceType == "websocket")
        #expect(entry.response.status == 101)
        let messages = try #require(entry._webSocketMessages)
        // Each echo after the message it answers: a send is recorded as it is queued.
        #expect(messages.map(\.type).prefix(1) == ["send"])
        #expect(messages.filter { $0.type == "send" }.count == 2 && messages.filter { $0.type == "receive" }.count == 2)
        #expect(messages.map(\.type) != ["send", "receive", "receive", "send"])
        let file = String(decoding: try har.encoded(), as: UTF8.self)
        #expect(!file.contains("hunter2"))
        #expect(!file.contains("sekrit-token-42"))
        #expect(file.contains("_webSocketMessages"))

        // Offline: the recording answers each message sent with what followed it.
        let replay = HARReplayTransport(har)
        let replayed = try await replay.webSocket(request)
        // Two messages sent, as in the recording: whichever order the echoes came in, both follow.
        try await replayed.send(text: "anything")
        try await replayed.send(text: "more")
        var answers = replayed.messages.makeAsyncIterator()
        guard case .text(let first) = try await answers.next() else { Issue.record("no text answer"); return }
        #expect(first.contains("\"text\":\"hi\"") && !first.contains("hunter2"))
        await replayed.close()
        #expect(replayed.closeStatus?.code == .normalClosure)
    }

    @Test("a browser's HAR with a wss socket and its messages imports and replays")
    func browserHAR() async throws {
        let json = #"""
            {"log":{"version":"1.2","creator":{"name":"WebInspector","version":"537.36"},"pages":[],"entries":[
            {"startedDateTime":"2026-11-28T10:00:00.000Z","time":12,"_resourceType":"websocket",
             "request":{"method":"GET","url":"wss://feed.example.com/socket","httpVersion":"HTTP/1.1","headers":[],"queryString":[],"cookies":[],"headersSize":-1,"bodySize":0},
             "response":{"status":101,"statusText":"Switching Protocols","httpVersion":"HTTP/1.1","headers":[{"name":"Upgrade","value":"websocket"}],"cookies":[],"content":{"size":0,"mimeType":"x-unknown"},"redirectURL":"","headersSize":-1,"bodySize":0},
             "cache":{},"timings":{"blocked":-1,"dns":-1,"ssl":-1,"connect":-1,"send":0,"wait":12,"receive":0},
             "_webSocketMessages":[
               {"type":"receive","time":1795860000.1,"opcode":1,"data":"hello"},
               {"type":"send","time":1795860000.2,"opcode":1,"data":"subscribe"},
               {"type":"receive","time":1795860000.3,"opcode":2,"data":"AAEC"}]}]}}
            """#
        let har = try JSONDecoder().decode(HAR.self, from: Data(json.utf8))
        let socket = try await HARReplayTransport(har).webSocket(try APIRequest(urlString: "wss://feed.example.com/socket"))
        var iterator = socket.messages.makeAsyncIterator()
        #expect(try await iterator.next() == .text("hello"))
        try await socket.send(text: "subscribe")
        #expect(try await iterator.next() == .binary(Data([0, 1, 2])))
        await socket.close()
    }

    @Test("MockTransport scripts a socket: a greeting, an answer per message, and the server's close")
    func mockScript() async throws {
        let mock = MockTransport()
        mock.onWebSocket(
            "/ws/chat",
            WebSocketScript([
                .receive(.text("welcome")), .send, .receive(.text("got it")), .send, .close(WebSocketCloseCode(rawValue: 4000), reason: "bye"),
            ]))
        let socket = try await mock.webSocket(try APIRequest(urlString: "ws://chat.example/ws/chat"))
        var iterator = socket.messages.makeAsyncIterator()
        #expect(try await iterator.next() == .text("welcome"))
        try await socket.send(text: "one")
        #expect(try await iterator.next() == .text("got it"))
        try await socket.send(text: "two")
        let error = await #expect(throws: CatenaError.self) { try await iterator.next() }
        #expect((error?.underlyingError as? WebSocketClose)?.code.rawValue == 4000)
        // A plain GET to the socket's path is told to upgrade.
        #expect(try await mock.load(try APIRequest(urlString: "http://chat.example/ws/chat")).status.code == 426)
    }
}
