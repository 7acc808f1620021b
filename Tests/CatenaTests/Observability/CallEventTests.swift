import Catena
import CatenaTesting
import Foundation
import HTTPTypes
import Testing

/// Records the events reported to it, from any task.
final class EventLog: Sendable {
    private let events = Locked<[(at: Date, event: CallEvent)]>([])
    var all: [CallEvent] { events.withLock { $0.map(\.event) } }

    /// When the first event that `matches` was reported, if one was.
    func firstTime(of matches: (CallEvent) -> Bool) -> Date? {
        events.withLock { $0.first { matches($0.event) }?.at }
    }

    /// A middleware that makes each request report to this log.
    var observer: some HTTPMiddleware { Observing(log: self) }

    private struct Observing: HTTPMiddleware {
        let log: EventLog
        func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
            var request = request
            request.observe(CallObserver { event in log.events.withLock { $0.append((Date(), event)) } })
            return try await next.load(request)
        }
    }
}

/// Returns at once instead of sleeping.
private struct InstantClock: RetryClock {
    func now() -> Date { Date() }
    func sleep(for duration: Duration) async throws { try Task.checkCancellation() }
}

@Suite("Call events")
struct CallEventTests {
    let url = URL(string: "https://api.example.com/items")!

    @Test("RetryMiddleware reports each retry with its attempt number, delay and cause")
    func retry() async throws {
        let log = EventLog()
        let mock = MockTransport()
        mock.respond(status: .serviceUnavailable)
        mock.fail(.connectionLost)
        mock.respond()
        let chain = log.observer --> RetryMiddleware(RetryStrategy(baseDelay: .milliseconds(100), jitter: false), clock: InstantClock()) --> mock
        #expect(try await chain.load(APIRequest(url: url)).status == .ok)
        #expect(
            log.all == [
                .retrying(attempt: 2, delay: .milliseconds(100), after: .status(503)),
                .retrying(attempt: 3, delay: .milliseconds(200), after: .error(.connectionLost)),
            ])
    }

    @Test("only loaders below the observer report to it")
    func scope() async throws {
        let log = EventLog()
        let mock = MockTransport()
        mock.respond(status: .serviceUnavailable)
        mock.respond()
        let chain = RetryMiddleware(RetryStrategy(jitter: false), clock: InstantClock()) --> log.observer --> mock
        #expect(try await chain.load(APIRequest(url: url)).status == .ok)
        #expect(log.all.isEmpty)
    }

    @Test("TokenAuthMiddleware reports a refresh this call started, and whether it failed")
    func refresh() async throws {
        struct Refused: Error {}
        let log = EventLog()
        let mock = MockTransport()
        let failing = log.observer --> TokenAuthMiddleware(hosts: ["api.example.com"]) { _ in throw Refused() } --> mock
        await #expect(throws: CatenaError.self) { try await failing.load(APIRequest(url: url)) }
        let succeeding = log.observer --> TokenAuthMiddleware(hosts: ["api.example.com"]) { _ in BearerToken(accessToken: "t") } --> mock
        mock.respond()
        mock.respond()
        _ = try await succeeding.load(APIRequest(url: url))
        _ = try await succeeding.load(APIRequest(url: url))
        let refreshes = log.all.compactMap { event -> (Bool, Bool)? in
            guard case .tokenRefresh(let started, _, let succeeded) = event else { return nil }
            return (started, succeeded)
        }
        #expect(refreshes.map(\.0) == [true, true], "the second call of the succeeding chain had a token")
        #expect(refreshes.map(\.1) == [false, true])
    }

    @Test("CacheMiddleware reports miss, hit and revalidation; a transport reports the body bytes it produced")
    func cacheAndBody() async throws {
        let log = EventLog()
        let mock = MockTransport()
        mock.respond(headerFields: [.cacheControl: "max-age=0", .eTag: "\"v1\""], body: Data("one".utf8))
        mock.respond(status: .notModified, headerFields: [.eTag: "\"v1\""])
        mock.respond(headerFields: [.cacheControl: "max-age=60"], body: Data("two".utf8))
        mock.respond()
        let chain = log.observer --> CacheMiddleware() --> mock
        _ = try await chain.load(APIRequest(url: url))
        _ = try await chain.load(APIRequest(url: url))
        let other = URL(string: "https://api.example.com/other")!
        _ = try await chain.load(APIRequest(url: other))
        _ = try await chain.load(APIRequest(url: other))
        _ = try await chain.load(APIRequest(.post, url: url, body: .text("hello")))
        #expect(log.all == [.cache(.miss), .cache(.revalidated), .cache(.miss), .cache(.hit), .bodySent(bytes: 5)])
    }
}
