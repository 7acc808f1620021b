import Catena
import CatenaOpenAPI
import Foundation
import HTTPTypes
import OpenAPIRuntime
import Testing
@testable import CatenaTestSupport

/// The bridge pulls bodies, it does not pump them: what a generated client does not read
/// is not read from the server either.
@Suite("OpenAPI bridge: bodies pulled on demand")
struct PulledBodyTests {
    static func written(_ key: String) async throws -> Int {
        let base = try await TestServer.running().baseURL.absoluteString
        let stats = try await TransportKind.asyncHTTPClient.make().load(try APIRequest(.get, urlString: base + "/api/endless/stats?key=\(key)"))
        return try JSONDecoder().decode([String: Int].self, from: stats.body)["written"] ?? -1
    }

    @Test(
        "an endless streamed response held unread for 2 s, then read slowly: the transfer stalls, so nothing unread piles up", arguments: TransportKind.allCases
    )
    func endlessResponseHeld(kind: TransportKind) async throws {
        let server = try await TestServer.running()
        let key = UUID().uuidString
        let transport = CatenaClientTransport(kind.make(), streamedOperations: ["endless"])
        // What a generated client's operation does: `send`, then hand the body to its caller.
        let (response, body) = try await transport.send(
            HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/api/endless?key=\(key)"), body: nil, baseURL: server.baseURL,
            operationID: "endless")
        #expect(response.status == .ok)
        let held = try #require(body)
        // Held unread: the point of the test is what happens meanwhile.
        try await Task.sleep(for: .seconds(2))
        let whileHeld = try await Self.written(key)
        try await Task.sleep(for: .seconds(1))
        let later = try await Self.written(key)
        // Stalled: the server can send only what the reader's window and the sockets'
        // buffers hold (corelibs URLSession, which cannot pause, ends the body instead).
        #expect(whileHeld >= 0 && later - whileHeld <= 1 << 20, "\(kind): still sending (\(whileHeld), then \(later) bytes)")
        var iterator = held.makeAsyncIterator()
        var read = 0
        do {
            for _ in 0..<16 {
                guard let chunk = try await iterator.next() else { break }
                read += chunk.count
                try await Task.sleep(for: .milliseconds(20))
            }
        } catch {
            // corelibs URLSession cannot pause a transfer: a reader that fell behind by
            // more than the overflow limit ends the body, still bounded.
            #expect(kind == .urlSession, "\(error)")
        }
        if kind == .asyncHTTPClient { #expect(read > 0, "a pulled body still reads") }
    }

    @Test("a request body of unknown length is pulled chunk by chunk as it is sent, every byte arriving", arguments: TransportKind.allCases)
    func requestBodyPulled(kind: TransportKind) async throws {
        let server = try await TestServer.running()
        let pulled = Locked(0)
        let source = AsyncThrowingStream<HTTPBody.ByteChunk, any Error> { continuation in
            for index in 0..<8 { continuation.yield(HTTPBody.ByteChunk(repeating: UInt8(ascii: "a") + UInt8(index), count: 1024)) }
            continuation.finish()
        }
        let counted = source.map { chunk -> HTTPBody.ByteChunk in
            pulled.withLock { $0 += 1 }
            return chunk
        }
        let transport = CatenaClientTransport(kind.make())
        var request = HTTPRequest(method: .post, scheme: nil, authority: nil, path: "/api/echo-raw")
        request.headerFields[.contentType] = "application/octet-stream"
        let (response, answer) = try await transport.send(
            request, body: HTTPBody(counted, length: .unknown, iterationBehavior: .single), baseURL: server.baseURL, operationID: "echoRaw")
        #expect(response.status == .ok)
        let echoed = try await Data(collecting: try #require(answer), upTo: 1 << 20)
        #expect(echoed.count == 8 * 1024 && echoed.first == UInt8(ascii: "a") && echoed.last == UInt8(ascii: "h"))
        #expect(pulled.withLock { $0 } == 8)
    }
}
