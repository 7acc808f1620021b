import Catena
import CatenaAsyncHTTPClient
import Foundation
import HTTPTypes
import Testing
@testable import CatenaTestSupport

/// Holds a request on the demo server for `hold` seconds, counting concurrency per key.
struct HoldEndpoint: DataEndpoint {
    let key: String
    let hold: Double
    var fail = false

    func makeRequest() throws -> APIRequest {
        fail ? try .get("api", "status", "500") : try holdRequest(key, hold: hold)
    }
}

@Suite("Client: completion handlers")
struct CompletionTests {
    @Test("the completion runs exactly once with the content")
    func success() async throws {
        let calls = Tally()
        let handle = try await demoClient().send(HoldEndpoint(key: uniqueKey(), hold: 0)) { result in
            calls.add((try? result.get()) != nil ? "success" : "failure")
        }
        await handle.wait()
        #expect(calls.all == ["success": 1])
    }

    @Test("cancelling the handle makes the completion run exactly once with cancelled, and cancels the request")
    func cancel() async throws {
        let key = uniqueKey()
        let calls = Tally()
        let handle = try await demoClient().send(HoldEndpoint(key: key, hold: Timing.stretch(5))) { result in
            if case .failure(let error) = result { calls.add(error.code.rawValue) } else { calls.add("success") }
        }
        try await Task.sleep(for: .milliseconds(200))
        let cancelledAt = ContinuousClock.now
        handle.cancel()
        handle.cancel()
        await handle.wait()
        #expect(ContinuousClock.now - cancelledAt < Timing.stretch(.seconds(2.5)), "the request was cancelled, not waited out")
        #expect(calls.all == [CatenaError.Code.cancelled.rawValue: 1])
        try await Task.sleep(for: .milliseconds(100))
        #expect(calls.all == [CatenaError.Code.cancelled.rawValue: 1], "and never again")
    }
}

@Suite("Client: fan-out")
struct FanOutTests {
    @Test("results come back in input order, whatever order the calls finish in")
    func order() async throws {
        let client = try await demoClient()
        let ids = Array(1...12).shuffled()
        let endpoints = ids.map { DelayedUser(id: $0, delay: Double(13 - $0) * 0.01) }
        let users = try await client.sendAllOrFail(endpoints, maxConcurrent: 6)
        #expect(users.map(\.data.id) == ids)
    }

    @Test("the server never sees more than maxConcurrent in flight", arguments: [1, 3, 8])
    func bounded(limit: Int) async throws {
        let key = uniqueKey()
        let progress = Locked<[FanOutProgress]>([])
        let results = try await demoClient().sendAll((0..<16).map { _ in HoldEndpoint(key: key, hold: 0.1) }, maxConcurrent: limit) { update in
            progress.withLock { $0.append(update) }
        }
        #expect(results.count == 16)
        let stats = try await inFlightStats(key)
        // At most the limit; other tests share the client's 8 pooled connections, so
        // the server may see fewer at once.
        #expect(stats.peak <= limit)
        #expect(stats.peak >= 1)
        #expect(stats.total == 16)
        let updates = progress.withLock { $0 }
        #expect(updates.map(\.completed) == Array(1...16))
        #expect(updates.last?.fraction == 1)
    }

    @Test("collect runs everything and returns failures in place")
    func collect() async throws {
        let endpoints = (0..<6).map { HoldEndpoint(key: uniqueKey(), hold: 0, fail: $0 % 3 == 0) }
        let results = try await demoClient().sendAll(endpoints, maxConcurrent: 2, policy: .collect)
        #expect(results.map { (try? $0.get()) == nil } == [true, false, false, true, false, false])
        #expect(results.compactMap { if case .failure(let e) = $0 { e.response?.status.code } else { nil } } == [500, 500])
    }

    @Test("fail fast throws the first error and starts nothing after it")
    func failFast() async throws {
        let key = uniqueKey()
        // The call beside the failure holds for 30 s (120, the server's most, under
        // ThreadSanitizer): waiting for it instead of cancelling
        // it would take that long (a margin wide enough for a loaded test run: 6.2 s
        // were seen once with TLS handshakes in the same process).
        let endpoints = [HoldEndpoint(key: key, hold: 0, fail: true)] + (0..<20).map { _ in HoldEndpoint(key: key, hold: min(Timing.stretch(30), 120)) }
        let start = ContinuousClock.now
        let error = await #expect(throws: CatenaError.self) { try await demoClient().sendAllOrFail(endpoints, maxConcurrent: 2) }
        #expect(error?.response?.status.code == 500)
        #expect(ContinuousClock.now - start < Timing.stretch(.seconds(15)), "the in-flight call was cancelled, not waited for")
        try await Task.sleep(for: .milliseconds(300))
        #expect(try await inFlightStats(key).total <= 1, "at most the one call started beside the failure")
    }

    @Test("cancelling the caller cancels the calls in flight and starts no new ones")
    func cancellation() async throws {
        let key = uniqueKey()
        let client = try await demoClient()
        // Each call holds 10 s; ending within 5 s proves they were cancelled, with room
        // for a loaded two-core run (2.1 s were seen while other suites held the pool).
        let (progress, results) = client.fanOut((0..<40).map { _ in HoldEndpoint(key: key, hold: Timing.stretch(10)) }, maxConcurrent: 4)
        try await Task.sleep(for: .milliseconds(300))
        let cancelledAt = ContinuousClock.now
        results.cancel()
        let outcome = await results.result
        #expect(ContinuousClock.now - cancelledAt < Timing.stretch(.seconds(5)), "calls in flight were cancelled, not waited out")
        #expect((outcome.failure as? CatenaError)?.code == .cancelled)
        var updates: [FanOutProgress] = []
        for await update in progress { updates.append(update) }
        #expect(updates.count == 4, "each started call completed exactly once, and no other started: \(updates.count)")
        try await Task.sleep(for: .milliseconds(500))
        #expect(try await inFlightStats(key).total <= 4, "nothing beyond the first four reached the server")
    }

    @Test("progress is an AsyncSequence that ends with the fan-out")
    func progressSequence() async throws {
        let (progress, results) = try await demoClient().fanOut((0..<5).map { _ in HoldEndpoint(key: uniqueKey(), hold: 0) }, maxConcurrent: 2)
        var seen: [Int] = []
        for await update in progress { seen.append(update.completed) }
        #expect(seen == [1, 2, 3, 4, 5])
        #expect(try await results.value.count == 5)
    }
}

struct DelayedUser: JSONEndpoint {
    struct Envelope: Decodable, Sendable { struct User: Decodable, Sendable { let id: Int }; let data: User }
    typealias Content = Envelope
    let id: Int
    let delay: Double
    func makeRequest() throws -> APIRequest {
        try .get("api", "users", String(id), query: .items(["delay": String(delay)]))
    }
}
