import Catena
import CatenaDemoServer
import CatenaTesting
import Foundation
import HTTPTypes
import Testing
@testable import CatenaTestSupport

/// A clock whose time moves only when a test moves it, or when a call sleeps on it.
final class ManualClock: RetryClock {
    private let state = Locked<(now: Date, sleeps: [Duration])>((Date(), []))
    func now() -> Date { state.withLock { $0.now } }
    func sleep(for duration: Duration) async throws {
        try Task.checkCancellation()
        state.withLock {
            $0.sleeps.append(duration)
            $0.now = $0.now.addingTimeInterval(duration.seconds)
        }
    }
    func advance(_ duration: Duration) { state.withLock { $0.now = $0.now.addingTimeInterval(duration.seconds) } }
    var sleeps: [Duration] { state.withLock { $0.sleeps } }
}

struct LimitedStats: Decodable { let served: Int; let refused: Int }
struct FlakyStats: Decodable {
    let calls: Int
    let failed: Int
    let arrivals: [Double]?
}

@Suite("Rate limits kept against the demo server's quotas")
struct RateLimitTests {
    private func limited(client: String, quota: Int, window: Double, style: String) throws -> APIRequest {
        try APIRequest(
            .get, path: ["api", "limited"],
            query: [.init(name: "quota", value: "\(quota)"), .init(name: "window", value: "\(window)"), .init(name: "style", value: style)],
            headerFields: [HTTPField.Name("X-Client")!: client])
    }

    private func stats(client: String) async throws -> LimitedStats {
        let chain = EnvironmentMiddleware(try await TestServer.environment()) --> TransportKind.asyncHTTPClient.make()
        return try await chain.load(try APIRequest(.get, path: ["api", "limited", "stats"], query: [.init(name: "client", value: client)]))
            .decode(LimitedStats.self)
    }

    /// A window of seconds: a call let through just before the client's end of a window
    /// must reach the server before the server's end, and on a loaded run (the whole
    /// suite, ThreadSanitizer) a call can take longer than a 1 s window to get there.
    private static let window: Double = Timing.isThreadSanitized ? 8 : 3

    @Test(
        "a fan-out of 1 + 7 calls against 5 a window gets no 429, with either style of fields",
        arguments: TransportKind.allCases, ["ietf", "x"])
    func pacedFanOut(kind: TransportKind, style: String) async throws {
        let client = uniqueKey()
        let log = EventLog()
        let chain = log.observer --> EnvironmentMiddleware(try await TestServer.environment()) --> RateLimitMiddleware() --> kind.make()
        let request = try limited(client: client, quota: 5, window: Self.window, style: style)
        #expect(try await chain.load(request).status == .ok)
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<7 { group.addTask { try await chain.load(request).status.code } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(statuses == Array(repeating: 200, count: 7))
        let stats = try await stats(client: client)
        #expect(stats.served == 8)
        #expect(stats.refused == 0)
        #expect(log.all.contains { if case .rateLimitWait(_, false) = $0 { true } else { false } })
    }

    @Test("without the limiter the same fan-out runs into 429s (the server does enforce its quota)")
    func unpacedFanOut() async throws {
        let client = uniqueKey()
        let chain = EnvironmentMiddleware(try await TestServer.environment()) --> TransportKind.asyncHTTPClient.make()
        let request = try limited(client: client, quota: 5, window: 30, style: "ietf")
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<8 { group.addTask { try await chain.load(request).status.code } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(statuses.filter { $0 == 429 }.count == 3)
        let refused = try await chain.load(request)
        #expect(refused.problem?.title == "Too many requests")
        #expect(refused.headerFields[.retryAfter] != nil)
    }

    @Test("a 503 with Retry-After holds the whole origin: the next call waits and finds the backend back", arguments: TransportKind.allCases)
    func retryAfterHolds(kind: TransportKind) async throws {
        let key = uniqueKey()
        let log = EventLog()
        let chain = log.observer --> EnvironmentMiddleware(try await TestServer.environment()) --> RateLimitMiddleware() --> kind.make()
        let request = try APIRequest(
            .get, path: ["api", "outage"], query: [.init(name: "key", value: key), .init(name: "fail", value: "0.5"), .init(name: "retry-after", value: "1")])
        #expect(try await chain.load(request).status == .serviceUnavailable)
        #expect(log.all.contains(.rateLimitHold(for: .seconds(1))))
        // Another call (not the one that was told) waits out the hold, and so is not refused.
        #expect(try await chain.load(request).status == .ok)
        #expect(log.all.contains { if case .rateLimitWait(_, true) = $0 { true } else { false } })
    }

    @Test("a call that would wait longer than maxWait fails at once with rateLimited, and nothing is sent", arguments: TransportKind.allCases)
    func maxWait(kind: TransportKind) async throws {
        let key = uniqueKey()
        let environment = try await TestServer.environment()
        let chain = EnvironmentMiddleware(environment) --> RateLimitMiddleware(maxWait: .milliseconds(100)) --> kind.make()
        let request = try APIRequest(
            .get, path: ["api", "outage"], query: [.init(name: "key", value: key), .init(name: "fail", value: "60"), .init(name: "retry-after", value: "30")])
        #expect(try await chain.load(request).status == .serviceUnavailable)
        let error = await #expect(throws: CatenaError.self) { try await chain.load(request) }
        #expect(error?.code == .rateLimited)
        #expect(error?.description.contains("127.0.0.1:\(environment.port ?? 0) is held by Retry-After") == true)
        let stats = try await (EnvironmentMiddleware(environment) --> kind.make())
            .load(try APIRequest(.get, path: ["api", "outage", "stats"], query: [.init(name: "key", value: key)])).decode(FlakyStats.self)
        #expect(stats.calls == 1)
    }

    @Test("absurd rate-limit fields and Retry-After from a hostile server hold the origin no longer than maxHold", arguments: TransportKind.allCases)
    func hostileFields(kind: TransportKind) async throws {
        let server = try await FaultServer.running()
        let log = EventLog()
        let chain = log.observer --> RateLimitMiddleware(maxHold: .seconds(1)) --> kind.make()
        let request = faultRequest(.hostileRateLimit, on: server)
        #expect(try await chain.load(request).status.code == 429)
        #expect(log.all.contains(.rateLimitHold(for: .seconds(1))))
        #expect(try await chain.load(request).status.code == 429)
    }

    @Test("a declared limit keeps any window of its length to its count (virtual clock)")
    func declared() async throws {
        let clock = ManualClock()
        let transport = MockTransport()
        transport.on(nil, "**", status: .ok)
        let chain = RateLimitMiddleware(declared: ["api.example": .init(2, per: .seconds(1))], clock: clock) --> transport
        for _ in 0..<5 { _ = try await chain.load(try APIRequest(urlString: "https://api.example/x")) }
        // Calls 1 and 2 at once, 3 and 4 a second later, 5 two seconds later.
        #expect(clock.sleeps == [.seconds(1), .seconds(1)])
        _ = try await chain.load(try APIRequest(urlString: "https://other.example/x"))
        #expect(clock.sleeps.count == 2)  // another host is not limited
    }

    @Test("a cancelled waiter leaves at once with cancelled; reset() forgets a hold")
    func cancelAndReset() async throws {
        let clock = SignallingClock()
        let transport = MockTransport()
        transport.on(nil, "**", status: .tooManyRequests, headerFields: [.retryAfter: "30"])
        let chain = RateLimitMiddleware(maxWait: .seconds(60), clock: clock) --> transport
        #expect(try await chain.load(try APIRequest(urlString: "https://api.example/x")).status.code == 429)
        let waiting = Task { try await chain.load(try APIRequest(urlString: "https://api.example/x")) }
        var sleeps = clock.started.makeAsyncIterator()
        let wait = try #require(await sleeps.next())
        #expect(wait > .seconds(15) && wait <= .seconds(30))  // what is left of the 30 s hold
        waiting.cancel()
        let outcome = await waiting.result
        if case .failure(let error as CatenaError) = outcome { #expect(error.code == .cancelled) } else { Issue.record("the waiting call was sent") }
        #expect(transport.requests.count == 1)
        await chain.reset()
        #expect(try await chain.load(try APIRequest(urlString: "https://api.example/x")).status.code == 429)  // sent at once
        #expect(transport.requests.count == 2)
    }
}

/// The real time, and a report of each sleep as it starts.
final class SignallingClock: RetryClock {
    let started: AsyncStream<Duration>
    private let continuation: AsyncStream<Duration>.Continuation
    init() { (started, continuation) = AsyncStream.makeStream() }
    func now() -> Date { Date() }
    func sleep(for duration: Duration) async throws {
        continuation.yield(duration)
        try await Task.sleep(for: duration)
    }
}
