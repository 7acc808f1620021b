@testable import Catena
import CatenaTesting
import Foundation
import HTTPTypes
import Testing

/// The event source's reconnection rules, against a mock whose answers are scripted.
/// (The same against the demo server, on both transports, is in the integration tests.)
@Suite("Event source reconnection")
struct EventSourceTests {
    static let request = try! APIRequest(urlString: "https://example.com/events")
    static let fast = ReconnectPolicy(initialDelay: .milliseconds(1), minimumDelay: .milliseconds(1), maximumDelay: .milliseconds(50))

    static func stream(_ text: String, mock: MockTransport) {
        mock.respond(headerFields: [.contentType: "text/event-stream"], body: Data(text.utf8))
    }

    static let lastEventID = HTTPField.Name("Last-Event-ID")!

    @Test("a closed stream is reconnected with Last-Event-ID; 204 ends the source; ids carry over")
    func reconnectsAndStops() async throws {
        let mock = MockTransport()
        Self.stream("id: 1\ndata: a\n\nid: 2\ndata: b\n\nid: 3\ndata: cut-off", mock: mock)
        Self.stream("data: c\n\n", mock: mock)
        mock.respond(status: .noContent)
        let reconnections = Locked<[Reconnection]>([])
        let source = EventSource(Self.request, loader: mock, policy: Self.fast) { reconnection in
            reconnections.withLock { $0.append(reconnection) }
        }
        var events: [ServerSentEvent] = []
        for try await event in source { events.append(event) }
        #expect(events.map(\.data) == ["a", "b", "c"])
        #expect(events.map(\.lastEventID) == ["1", "2", "2"], "the id of a cut-off event never counts; the id carries over")
        let sent = mock.requests
        #expect(sent.count == 3)
        #expect(sent.map { $0.headerFields[Self.lastEventID] } == [nil, "2", "2"])
        #expect(sent.allSatisfy { $0.headerFields[.accept] == "text/event-stream" && $0.headerFields[.cacheControl] == "no-cache" })
        #expect(reconnections.withLock { $0.map(\.attempt) } == [1, 1])
        #expect(reconnections.withLock { $0.allSatisfy { $0.reason == nil } })
    }

    @Test("failures in a row double the wait up to the cap; an event resets it; the server's retry is the base; Retry-After is a floor")
    func backoff() {
        let policy = ReconnectPolicy(initialDelay: .seconds(3), minimumDelay: .milliseconds(100), maximumDelay: .seconds(20))
        #expect(
            (1...6).map { policy.delay(attempt: $0, serverRetry: nil) } == [.seconds(3), .seconds(6), .seconds(12), .seconds(20), .seconds(20), .seconds(20)])
        #expect(policy.delay(attempt: 1, serverRetry: .milliseconds(500)) == .milliseconds(500))
        #expect(policy.delay(attempt: 1, serverRetry: .zero) == .milliseconds(100), "retry: 0 is held to the minimum")
        #expect(policy.delay(attempt: 1, serverRetry: .seconds(3_600)) == .seconds(20))
        #expect(policy.delay(attempt: 1, serverRetry: nil, retryAfter: .seconds(10)) == .seconds(10))
        // Retry-After is a floor the cap does not cut (a server shedding load asked for it); a day bounds it.
        #expect(policy.delay(attempt: 1, serverRetry: nil, retryAfter: .seconds(600)) == .seconds(600))
        #expect(policy.delay(attempt: 1, serverRetry: nil, retryAfter: .seconds(10 * 86_400)) == .seconds(86_400))
        #expect(policy.delay(attempt: 10_000, serverRetry: nil) == .seconds(20), "no overflow after many failures")
    }

    @Test("connection failures and 503 are reconnected after; the attempts in a row are counted and capped")
    func failuresInARow() async throws {
        let mock = MockTransport()
        mock.fail(.connectionLost)
        mock.respond(status: .serviceUnavailable, headerFields: [.retryAfter: "0"])
        mock.fail(.timedOut)
        Self.stream("retry: 5\ndata: x\n\n", mock: mock)
        mock.fail(.cannotConnect)
        mock.fail(.cannotConnect)
        mock.fail(.cannotConnect)
        let reconnections = Locked<[Reconnection]>([])
        var policy = Self.fast
        policy.maximumAttempts = 3
        let source = EventSource(Self.request, loader: mock, policy: policy) { reconnection in
            reconnections.withLock { $0.append(reconnection) }
        }
        var events: [String] = []
        do {
            for try await event in source { events.append(event.data) }
            Issue.record("expected the source to give up")
        } catch {
            #expect(error.code == .cannotConnect)
        }
        #expect(events == ["x"])
        let seen = reconnections.withLock { $0 }
        #expect(seen.map(\.attempt) == [1, 2, 3, 1, 2, 3], "the count starts again after the event")
        #expect(seen.map { $0.reason?.code } == [.connectionLost, .unacceptableStatus, .timedOut, nil, .cannotConnect, .cannotConnect])
        #expect(seen[3].delay >= .milliseconds(5) && seen[3].delay <= .milliseconds(50), "the server's retry sets the base: \(seen[3].delay)")
        #expect(mock.pendingHandlers == 0)
        #expect(mock.requests.count == 7)
    }

    @Test("a status other than 200, 204 and the unavailable ones ends the source at once, with that status")
    func otherStatusEnds() async throws {
        for status in [HTTPResponse.Status.unauthorized, .notFound, .internalServerError] {
            let mock = MockTransport()
            mock.respond(status: status)
            do {
                for try await _ in EventSource(Self.request, loader: mock, policy: Self.fast) {}
                Issue.record("expected \(status) to end the source")
            } catch {
                #expect(error.code == .unacceptableStatus)
                #expect(error.response?.status == status)
            }
            #expect(mock.requests.count == 1)
        }
        // The unavailable ones too, when the policy says so.
        let mock = MockTransport()
        mock.respond(status: .serviceUnavailable)
        var policy = Self.fast
        policy.reconnectsAfterUnavailable = false
        await #expect(throws: CatenaError.self) {
            for try await _ in EventSource(Self.request, loader: mock, policy: policy) {}
        }
        #expect(mock.requests.count == 1)
    }

    @Test("a 200 that is not an event stream, or an event over the limit, ends the source with invalidResponse")
    func notAnEventStream() async throws {
        let mock = MockTransport()
        mock.respond(headerFields: [.contentType: "application/json"], body: Data("{}".utf8))
        do {
            for try await _ in EventSource(Self.request, loader: mock, policy: Self.fast) {}
            Issue.record("expected a failure")
        } catch {
            #expect(error.code == .invalidResponse)
            #expect(error.detail?.contains("text/event-stream") == true)
        }
        let big = MockTransport()
        Self.stream("data: " + String(repeating: "x", count: 2_000) + "\n\n", mock: big)
        do {
            for try await _ in EventSource(Self.request, loader: big, policy: Self.fast, maxEventBytes: 1_000) {}
            Issue.record("expected a failure")
        } catch {
            #expect(error.code == .invalidResponse)
        }
        #expect(big.requests.count == 1)
    }

    @Test("cancelling the task while the source waits to reconnect ends it at once with cancelled")
    func cancelWhileWaiting() async throws {
        let mock = MockTransport()
        mock.fail(.connectionLost)
        let waiting = AsyncStream<Void>.makeStream()
        let policy = ReconnectPolicy(initialDelay: .seconds(3_600), maximumDelay: .seconds(3_600))
        let source = EventSource(Self.request, loader: mock, policy: policy) { _ in waiting.continuation.yield() }
        let task = Task { () throws -> Int in
            var count = 0
            for try await _ in source { count += 1 }
            return count
        }
        var iterator = waiting.stream.makeAsyncIterator()
        await iterator.next()
        let start = ContinuousClock.now
        task.cancel()
        let result = await task.result
        #expect(ContinuousClock.now - start < .seconds(30))
        #expect((try? result.get()) == nil)
        if case .failure(let error) = result { #expect((error as? CatenaError)?.code == .cancelled, "\(error)") }
        #expect(mock.requests.count == 1)
    }
}
