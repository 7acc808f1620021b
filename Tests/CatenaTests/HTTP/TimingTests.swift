import Catena
import Foundation
import Testing
@testable import CatenaTestSupport

/// What the transports measure of each exchange: `APIResponse.timing` and the
/// `responseHead` event. Lower bounds only: they check what was measured, never how fast.
@Suite("Response timing")
struct TimingTests {
    /// A head held back 0.2 s by the server, then four dots 0.3 s apart.
    static func slowRequest() throws -> APIRequest {
        try APIRequest(
            .get, path: ["api", "drip"],
            query: [
                URLQueryItem(name: "delay", value: "0.2"), URLQueryItem(name: "chunks", value: "4"),
                URLQueryItem(name: "interval", value: "0.3"),
            ])
    }

    /// When the last of ``slowRequest()``'s dots leaves the server, at the earliest.
    static let lastDot = Duration.milliseconds(1400)

    /// The least body time any transport may report. The head leaves by the first dot
    /// (0.5 s) and the body ends at the last (1.4 s), but a head read late under load eats
    /// into that (under 50 ms were left in a full debug run on two cores), so the bound only
    /// tells a body timed from its head from one stamped when it ended (microseconds); the
    /// sum below holds the body's end to the server's last dot.
    static let leastBody = Duration.milliseconds(5)

    @Test("a loaded response carries its time to the head and its body's duration; the head is reported once", arguments: TransportKind.withHTTPS)
    func loaded(kind: TransportKind) async throws {
        let chain = try await kind.chain()
        let events = Locked<[CallEvent]>([])
        var request = try Self.slowRequest()
        request.observe(CallObserver { event in events.withLock { $0.append(event) } })
        let started = ContinuousClock.now
        let response = try await chain.load(request)
        let elapsed = ContinuousClock.now - started
        #expect(response.body == Data("....".utf8))
        let timing = try #require(response.timing)
        #expect(timing.timeToFirstByte >= .milliseconds(190))
        let body = try #require(timing.bodyDuration)
        #expect(body >= Self.leastBody)
        // The body cannot end before the server sent its last dot, however loaded.
        #expect(timing.timeToFirstByte + body >= Self.lastDot)
        #expect(timing.timeToFirstByte + body <= elapsed)
        let heads = events.withLock { $0 }.compactMap { event -> (Int, Duration)? in
            if case .responseHead(let status, let after) = event { (status, after) } else { nil }
        }
        #expect(heads.count == 1)
        #expect(heads.first?.0 == 200)
        #expect(heads.first?.1 == timing.timeToFirstByte)
    }

    @Test("a streamed response has its time to the head at once, and collect() adds the body's duration", arguments: TransportKind.withHTTPS)
    func streamed(kind: TransportKind) async throws {
        let chain = try await kind.chain()
        let started = ContinuousClock.now
        let streamed = try await chain.stream(try Self.slowRequest())
        let head = try #require(streamed.timing)
        #expect(head.timeToFirstByte >= .milliseconds(190))
        #expect(head.bodyDuration == nil)
        #expect(streamed.head.timing == head)
        let collected = try await streamed.collect()
        #expect(collected.timing?.timeToFirstByte == head.timeToFirstByte)
        let elapsed = ContinuousClock.now - started
        let body = try #require(collected.timing?.bodyDuration)
        #expect(body >= Self.leastBody)
        #expect(head.timeToFirstByte + body >= Self.lastDot)
        #expect(head.timeToFirstByte + body <= elapsed)
    }

    @Test("each redirect hop is its own exchange: the final one's timing is on the response", arguments: TransportKind.allCases)
    func redirected(kind: TransportKind) async throws {
        let chain = try await kind.chain()
        let events = Locked<[CallEvent]>([])
        var request = try APIRequest(.get, path: ["api", "redirect"], query: [URLQueryItem(name: "to", value: "/api/echo")])
        request.observe(CallObserver { event in events.withLock { $0.append(event) } })
        let response = try await chain.load(request)
        #expect(response.status == .ok)
        #expect(response.timing != nil)
        let statuses = events.withLock { $0 }.compactMap { event -> Int? in
            if case .responseHead(let status, _) = event { status } else { nil }
        }
        #expect(statuses == [302, 200])
    }
}
