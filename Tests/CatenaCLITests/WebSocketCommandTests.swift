import Catena
import CatenaDemoServer
import Foundation
import Testing
@testable import CatenaTestSupport

/// `catena ws` as a user runs it, against the demo and the misbehaving server. One
/// process at a time, and not under ThreadSanitizer, as `catena request`'s suite (its
/// comment says why).
@Suite(
    "catena ws", .serialized, .timeLimit(.minutes(3)),
    .enabled(if: !Timing.isThreadSanitized, "the command runs in child processes; see RequestCommandTests"))
struct WebSocketCommandTests {
    @Test("lines of standard input go out as messages and the echoes come out, one a line; exit 0")
    func echo() async throws {
        let server = try await TestServer.withWebSockets()
        let outcome = try await CatenaCommandLine.run(
            ["ws", "ws://127.0.0.1:\(server.port)/ws/echo", "--linger", "5"], input: Data("hello\nwörld\n".utf8))
        #expect(outcome.status == 0, "\(outcome.errors)")
        #expect(outcome.text == "hello\nwörld\n")
    }

    @Test("--compressed offers permessage-deflate; -i shows that the server took it")
    func compressed() async throws {
        let server = try await TestServer.withWebSockets()
        let long = String(repeating: "squeeze me ", count: 500)
        let outcome = try await CatenaCommandLine.run(
            ["ws", "ws://127.0.0.1:\(server.port)/ws/echo", "--compressed", "-i", "--linger", "5"], input: Data((long + "\nhi\n").utf8))
        #expect(outcome.status == 0, "\(outcome.errors)")
        #expect(outcome.text == long + "\nhi\n")
        #expect(outcome.errors.lowercased().contains("sec-websocket-extensions: permessage-deflate"))
        let plain = try await CatenaCommandLine.run(["ws", "ws://127.0.0.1:\(server.port)/ws/echo", "-i", "--linger", "5"], input: Data("hi\n".utf8))
        #expect(plain.status == 0, "\(plain.errors)")
        #expect(!plain.errors.lowercased().contains("permessage-deflate"))
    }

    @Test("a feed ends when the server closes in order, also with standard input still open")
    func feed() async throws {
        let server = try await TestServer.withWebSockets()
        let outcome = try await CatenaCommandLine.run(["ws", "ws://127.0.0.1:\(server.port)/ws/ticker?n=3&ms=20", "--linger", "30"])
        #expect(outcome.status == 0, "\(outcome.errors)")
        #expect(outcome.text.split(separator: "\n").count == 3)
    }

    @Test("a refused upgrade exits with its status class (4) and says so")
    func refused() async throws {
        let server = try await TestServer.withWebSockets()
        let outcome = try await CatenaCommandLine.run(["ws", "ws://127.0.0.1:\(server.port)/ws/protected/echo"])
        #expect(outcome.status == 4)
        #expect(outcome.errors.contains("instead of 101"))
    }

    @Test("an abnormal close exits 9 with the code; a protocol violation exits 8")
    func abnormal() async throws {
        let server = try await FaultServer.running()
        let closed = try await CatenaCommandLine.run(["ws", server.baseURL.appending(path: "ws-abnormal-close").absoluteString, "--linger", "30"])
        #expect(closed.status == 9)
        #expect(closed.errors.contains("1011"))
        #expect(!closed.errors.unicodeScalars.contains("\u{1B}"))
        let broken = try await CatenaCommandLine.run(["ws", server.baseURL.appending(path: "ws-masked").absoluteString, "--linger", "30"])
        #expect(broken.status == 8)
    }

    @Test("ws refuses a body and URLSession before it connects")
    func refusedOptions() async throws {
        let body = try await CatenaCommandLine.run(["ws", "ws://127.0.0.1:9/x", "--json", "{}"])
        #expect(body.status != 0)
        #expect(body.errors.contains("standard input"))
        let session = try await CatenaCommandLine.run(["ws", "ws://127.0.0.1:9/x", "--transport", "urlsession"])
        #expect(session.errors.contains("--transport ahc"))
    }
}
