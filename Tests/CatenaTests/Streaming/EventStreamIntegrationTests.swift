@testable import Catena
import CatenaAsyncHTTPClient
import Foundation
import Logging
import Testing
@testable import CatenaTestSupport

/// Server-sent events and JSON Lines from the demo server, on both transports.
@Suite("Event streams against the demo server")
struct EventStreamIntegrationTests {
    @Test("events arrive in order with their ids and the server's retry", arguments: TransportKind.withHTTPS)
    func events(kind: TransportKind) async throws {
        let chain = try await kind.chain()
        let response = try await chain.stream(
            try APIRequest(
                .get, path: ["api", "events"],
                query: [
                    URLQueryItem(name: "count", value: "25"), URLQueryItem(name: "interval", value: "0.01"),
                ]))
        #expect(response.headerFields[.contentType] == "text/event-stream")
        var events: [ServerSentEvent] = []
        for try await event in response.serverSentEvents() { events.append(event) }
        #expect(events.map(\.data) == (1...25).map { "token-\($0)" })
        #expect(events.map(\.lastEventID) == (1...25).map(String.init))
        #expect(events.allSatisfy { $0.event == "token" && $0.retry == .milliseconds(100) })
    }

    @Test("a cut connection ends the event sequence with an error, not a clean end", arguments: TransportKind.withHTTPS)
    func dropped(kind: TransportKind) async throws {
        let chain = try await kind.chain()
        let response = try await chain.stream(
            try APIRequest(
                .get, path: ["api", "events"],
                query: [
                    URLQueryItem(name: "count", value: "10"), URLQueryItem(name: "interval", value: "0"), URLQueryItem(name: "drop_after", value: "3"),
                ]))
        var seen = 0
        await #expect(throws: CatenaError.self) {
            for try await _ in response.serverSentEvents() { seen += 1 }
        }
        // 3, or fewer when the dying server dropped writes it had not flushed yet.
        #expect(seen <= 3)
    }

    @Test(
        "an event source reconnects through three cut connections with Last-Event-ID and ends on 204: every event exactly once",
        arguments: TransportKind.withHTTPS)
    func eventSourceReconnects(kind: TransportKind) async throws {
        let chain = try await kind.chain()
        let request = try APIRequest(
            .get, path: ["api", "events"],
            query: [
                URLQueryItem(name: "count", value: "10"), URLQueryItem(name: "interval", value: "0"),
                URLQueryItem(name: "drop_after", value: "3"), URLQueryItem(name: "retry_ms", value: "20"), URLQueryItem(name: "end", value: "204"),
            ])
        let reconnections = Locked<[Reconnection]>([])
        let source = EventSource(request, loader: chain, policy: ReconnectPolicy(minimumDelay: .milliseconds(10))) { reconnection in
            reconnections.withLock { $0.append(reconnection) }
        }
        var iterator = source.makeAsyncIterator()
        var events: [ServerSentEvent] = []
        while let event = try await iterator.next() { events.append(event) }
        #expect(events.map(\.data) == (1...10).map { "token-\($0)" })
        #expect(events.map(\.lastEventID) == (1...10).map(String.init))
        let seen = reconnections.withLock { $0 }
        // Cut after 3, 6 and 9 (connection lost); the fourth ends cleanly after 10;
        // the fifth is answered 204. A server that dies drops what it had not sent
        // yet, so under load a cut can come earlier: what must hold is that each
        // reconnection goes on from the last event received, and the order of ends.
        // ("" until an event arrived; the same twice when a connection was cut
        // before its first event reached the client.)
        let ids = seen.map { $0.lastEventID.isEmpty ? 0 : Int($0.lastEventID) ?? -1 }
        #expect(!ids.contains(-1) && zip(ids, ids.dropFirst()).allSatisfy { $0 <= $1 }, "\(seen.map(\.lastEventID))")
        #expect(seen.count >= 4)
        #expect(seen.dropLast().allSatisfy { $0.reason?.code == .connectionLost }, "\(seen.map { $0.reason.map(String.init(describing:)) ?? "closed" })")
        #expect(seen.last?.reason == nil && seen.last?.lastEventID == "10")
        // A connection cut before the server's `retry:` arrived waits the policy's own
        // initial delay (seen under load on the first connection); after it, 20 ms.
        #expect(
            seen.allSatisfy { $0.delay >= .milliseconds(20) && ($0.delay < .seconds(1) || $0.lastEventID.isEmpty) },
            "the server's retry is the wait: \(seen.map { "\($0.lastEventID): \($0.delay)" })")
        #expect(iterator.reconnections == seen.count)
    }

    @Test("an event source waits out a 503's Retry-After and goes on; told not to, it ends with the 503", arguments: TransportKind.withHTTPS)
    func eventSourceUnavailable(kind: TransportKind) async throws {
        let chain = try await kind.chain()
        func request(_ key: String) throws -> APIRequest {
            try APIRequest(
                .get, path: ["api", "events"],
                query: [
                    URLQueryItem(name: "count", value: "3"), URLQueryItem(name: "interval", value: "0"), URLQueryItem(name: "end", value: "204"),
                    URLQueryItem(name: "unavailable", value: "1"), URLQueryItem(name: "key", value: key),
                ])
        }
        let reconnections = Locked<[Reconnection]>([])
        let policy = ReconnectPolicy(initialDelay: .milliseconds(50), minimumDelay: .milliseconds(10))
        let source = EventSource(try request(UUID().uuidString), loader: chain, policy: policy) { reconnection in
            reconnections.withLock { $0.append(reconnection) }
        }
        var events: [String] = []
        for try await event in source { events.append(event.data) }
        #expect(events == ["token-1", "token-2", "token-3"])
        let first = try #require(reconnections.withLock { $0.first })
        #expect(first.reason?.code == .unacceptableStatus && first.reason?.response?.status.code == 503)
        #expect(first.delay >= .seconds(1) && first.delay < .seconds(2), "Retry-After: 1 is the wait, not the policy's 50 ms: \(first.delay)")

        var strict = policy
        strict.reconnectsAfterUnavailable = false
        let refused = try request(UUID().uuidString)
        do {
            for try await _ in EventSource(refused, loader: chain, policy: strict) {}
            Issue.record("expected the 503 to end the source")
        } catch {
            #expect(error.code == .unacceptableStatus && error.response?.status.code == 503)
        }
    }

    @Test("an event source ends on a refused request at once, and leaving its loop ends the connection", arguments: TransportKind.withHTTPS)
    func eventSourceEnds(kind: TransportKind) async throws {
        let chain = try await kind.chain()
        let refused = try APIRequest(.get, path: ["api", "events"], query: [URLQueryItem(name: "count", value: "-1")])
        do {
            for try await _ in EventSource(refused, loader: chain) {}
            Issue.record("expected the 400 to end the source")
        } catch {
            #expect(error.code == .unacceptableStatus)
            #expect(error.response?.status.code == 400)
        }
        let notEvents = try APIRequest(.get, path: ["api", "export.jsonl"], query: [URLQueryItem(name: "count", value: "3")])
        do {
            for try await _ in EventSource(notEvents, loader: chain) {}
            Issue.record("expected a JSON Lines body to end the source")
        } catch {
            #expect(error.code == .invalidResponse)
        }
        // A long stream, left after two events: the throttle's only slot comes back.
        let throttled = ThrottleMiddleware(maxInFlight: 1) --> chain
        let long = try APIRequest(
            .get, path: ["api", "events"],
            query: [
                URLQueryItem(name: "count", value: "100000"), URLQueryItem(name: "interval", value: "0.01"),
            ])
        var seen = 0
        for try await _ in EventSource(long, loader: throttled) {
            seen += 1
            if seen == 2 { break }
        }
        #expect(seen == 2)
        // The next call needs the only slot: it gets it soon, or the test fails (and
        // frees it) instead of hanging.
        let done = Catena.Locked(false)
        let next = Task {
            defer { done.withLock { $0 = true } }
            return try await throttled.load(try APIRequest(.get, path: ["api", "users", "2"]))
        }
        let freed = await Timing.eventually(within: .seconds(3)) { done.withLock { $0 } }
        #expect(freed, "the slot was still held by the event source whose loop was left")
        if !freed { next.cancel() }
        if case .success(let response) = await next.result { #expect(response.status == .ok) }
    }

    struct Row: Decodable, Sendable { let n: Int }

    @Test("a JSON Lines export decodes row by row", arguments: TransportKind.withHTTPS)
    func jsonLines(kind: TransportKind) async throws {
        let chain = try await kind.chain()
        let response = try await chain.stream(
            try APIRequest(
                .get, path: ["api", "export.jsonl"],
                query: [
                    URLQueryItem(name: "count", value: "5000"), URLQueryItem(name: "per_chunk", value: "37"),
                ]))
        var expected = 1
        for try await row in response.jsonLines(of: Row.self) {
            #expect(row.n == expected)
            expected += 1
        }
        #expect(expected == 5001)
    }
}
