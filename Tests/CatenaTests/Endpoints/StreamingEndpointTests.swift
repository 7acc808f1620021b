import Catena
import Foundation
import HTTPTypes
import ReqresAPI
import Testing
@testable import CatenaTestSupport

/// The model-like token stream of the demo server, as an endpoint.
struct TokenEvents: EventStreamEndpoint {
    typealias ErrorBody = ReqresError
    var count = 10
    var dropAfter = 0

    func makeRequest() throws -> APIRequest {
        try .get(
            "api", "events",
            query: [
                URLQueryItem(name: "count", value: String(count)), URLQueryItem(name: "interval", value: "0"),
                URLQueryItem(name: "drop_after", value: String(dropAfter)), URLQueryItem(name: "retry_ms", value: "20"),
                URLQueryItem(name: "end", value: "204"),
            ])
    }
}

/// The demo server's JSON Lines export, as an endpoint.
struct ExportRows: JSONLinesEndpoint {
    struct Row: Decodable, Sendable { let n: Int }
    typealias Record = Row
    typealias ErrorBody = ReqresError
    var count = 1_000

    func makeRequest() throws -> APIRequest {
        try .get("api", "export.jsonl", query: [URLQueryItem(name: "count", value: String(count)), URLQueryItem(name: "per_chunk", value: "7")])
    }
}

/// A body in two parts, the second sent only when asked for.
struct GatedBytes: ByteStreamEndpoint {
    let key: String
    func makeRequest() throws -> APIRequest { try .get("api", "gated", query: [URLQueryItem(name: "key", value: key)]) }
}

@Suite("Streaming endpoints through Client")
struct StreamingEndpointTests {
    @Test("a JSON Lines endpoint streams decoded rows; send gives the same rows collected", arguments: TransportKind.allCases)
    func jsonLines(kind: TransportKind) async throws {
        let client = try await demoClient(kind)
        var streamed: [Int] = []
        for try await row in try await client.stream(ExportRows()) { streamed.append(row.n) }
        #expect(streamed == Array(1...1_000))
        var collected: [Int] = []
        for try await row in try await client.send(ExportRows(count: 5)) { collected.append(row.n) }
        #expect(collected == Array(1...5))
    }

    @Test("a byte stream endpoint hands over the first part before the server sends the rest", arguments: TransportKind.allCases)
    func bytes(kind: TransportKind) async throws {
        let client = try await demoClient(kind)
        let key = uniqueKey()
        var iterator = try await client.stream(GatedBytes(key: key)).makeAsyncIterator()
        var received = Data()
        while received.count < 5, let chunk = try await iterator.next() { received.append(chunk) }
        #expect(String(decoding: received, as: UTF8.self) == "first")
        _ = try await client.loader.load(try APIRequest(.post, path: ["api", "gated", "open"], query: [URLQueryItem(name: "key", value: key)]))
        while let chunk = try await iterator.next() { received.append(chunk) }
        #expect(String(decoding: received, as: UTF8.self) == "firstrest")
    }

    @Test("a refused head throws unacceptableStatus with the API's error body, read from the stream", arguments: TransportKind.allCases)
    func refused(kind: TransportKind) async throws {
        let client = try await demoClient(kind)
        do {
            _ = try await client.stream(ExportRows(count: -5))
            Issue.record("expected a 400")
        } catch {
            #expect(error.code == .unacceptableStatus)
            #expect(error.response?.status.code == 400)
            #expect(error.apiError(as: ReqresError.self)?.error.contains("count must be") == true, "\(error)")
        }
    }

    @Test("an event stream endpoint streams one connection; its event source goes on across cut connections", arguments: TransportKind.allCases)
    func events(kind: TransportKind) async throws {
        let client = try await demoClient(kind)
        var once: [String] = []
        for try await event in try await client.stream(TokenEvents(count: 4)) { once.append(event.data) }
        #expect(once == (1...4).map { "token-\($0)" })

        let reconnections = Catena.Locked(0)
        let source = try client.eventSource(for: TokenEvents(count: 9, dropAfter: 4), policy: ReconnectPolicy(minimumDelay: .milliseconds(10))) { _ in
            reconnections.withLock { $0 += 1 }
        }
        var all: [String] = []
        for try await event in source { all.append(event.data) }
        #expect(all == (1...9).map { "token-\($0)" })
        #expect(reconnections.withLock { $0 } >= 3, "cut after 4 and 8 (or earlier), closed after 9, then 204")
    }
}
