import CatenaTesting
import Foundation
import HTTPTypes
import Testing
@testable import Catena

@Suite("RateLimitMiddleware's bookkeeping: windows, holds and waits that end")
struct LimiterStateTests {
    private let maxHold = Duration.seconds(60)

    private func answer(_ fields: [String: String], status: HTTPResponse.Status = .ok) throws -> APIResponse {
        var headers = HTTPFields()
        for (name, value) in fields { headers[HTTPField.Name(name)!] = value }
        return APIResponse(status: status, headerFields: headers, request: try APIRequest(urlString: "https://api.example/"))
    }

    /// An answer with `X-RateLimit-*` fields of a quota of 5 and an epoch reset.
    private func x(remaining: Int, reset: Int) throws -> APIResponse {
        try answer(["X-RateLimit-Limit": "5", "X-RateLimit-Remaining": "\(remaining)", "X-RateLimit-Reset": "\(reset)"])
    }

    private func go(_ state: inout LimiterState, at now: Date) throws -> LimiterState.Ticket {
        guard case .go(let ticket) = state.decide(now: now, declared: nil, learnsFirst: true, maxHold: maxHold) else {
            throw CatenaError(.invalidRequest, request: try APIRequest(urlString: "https://api.example/"), detail: "not let through")
        }
        return ticket
    }

    @Test("after a long idle, a known quota starts in the window that holds now: 2 calls, then a wait of less than the window")
    func idle() throws {
        var state = LimiterState()
        let start = Date()
        let first = try go(&state, at: start)
        _ = state.finish(first, response: try answer(["RateLimit-Policy": #""p";q=2;w=1"#, "RateLimit": #""p";r=1;t=1"#]), now: start, maxHold: maxHold)
        let later = start.addingTimeInterval(10.3)
        _ = try go(&state, at: later)
        _ = try go(&state, at: later)
        guard case .wait(let until, false) = state.decide(now: later, declared: nil, learnsFirst: true, maxHold: maxHold) else {
            Issue.record("a third call went in a window of 2")
            return
        }
        #expect(until > later && until <= later.addingTimeInterval(1))
    }

    @Test("a window learned while calls were in flight counts them as spent")
    func inFlightAtLearning() throws {
        var state = LimiterState(learned: true)
        let now = Date()
        let tickets = try (0..<3).map { _ in try go(&state, at: now) }
        _ = state.finish(tickets[0], response: try answer(["RateLimit": #""p";r=3;t=5"#]), now: now, maxHold: maxHold)
        // The server had seen 1 of the 3 when it said 3 left: 2 are still coming.
        _ = try go(&state, at: now)
        guard case .wait = state.decide(now: now, declared: nil, learnsFirst: true, maxHold: maxHold) else {
            Issue.record("more calls went than the server said were left")
            return
        }
    }

    @Test("pk partitions keep their windows apart, and a server naming ever new ones keeps at most 16 an origin")
    func partitions() throws {
        var state = LimiterState(learned: true)
        let now = Date()
        let a = try go(&state, at: now)
        _ = state.finish(a, response: try answer(["RateLimit": #""p";r=0;t=30;pk=:YWxpY2U=:"#]), now: now, maxHold: maxHold)
        let b = try? go(&state, at: now)
        #expect(b == nil, "alice's spent window holds the origin")
        // Bob's window, with calls left, does not overwrite alice's spent one.
        _ = state.learn(from: try answer(["RateLimit": #""p";r=9;t=30;pk=:Ym9i:"#]), now: now, maxHold: maxHold)
        #expect(state.windows.count == 2)
        #expect(state.windows.values.map(\.remaining).sorted() == [0, 9])
        for index in 0..<100 {
            _ = state.learn(
                from: try answer(["RateLimit": "\"p\";r=5;t=30;pk=:\(Data("user\(index)".utf8).base64EncodedString()):"]), now: now, maxHold: maxHold)
        }
        #expect(state.windows.count == LimiterState.maximumWindows)
    }

    @Test("calls still in flight when a window ends are spent in the next until their answers say which window counted them")
    func carried() throws {
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        var state = LimiterState()
        let probe = try go(&state, at: start)
        _ = state.finish(probe, response: try x(remaining: 4, reset: 1_800_000_001), now: start, maxHold: maxHold)
        let late = try (0..<4).map { _ in try go(&state, at: start) }  // sent, not yet answered
        // The window ends with all four in flight: one call goes in the next, not five.
        let next = start.addingTimeInterval(1.01)
        let fifth = try go(&state, at: next)
        guard case .waitForNews = state.decide(now: next, declared: nil, learnsFirst: true, maxHold: maxHold) else {
            Issue.record("a second call went while four may still be counted here")
            return
        }
        // Two answers say the old window counted them: those two come back.
        for ticket in late.prefix(2) {
            _ = state.finish(ticket, response: try x(remaining: 0, reset: 1_800_000_001), now: next, maxHold: maxHold)
        }
        _ = try go(&state, at: next)
        _ = try go(&state, at: next)
        // The other two reached the server late, in the new window: they stay spent, and
        // their reset is the new window's end.
        for ticket in late.suffix(2) {
            _ = state.finish(ticket, response: try x(remaining: 2, reset: 1_800_000_003), now: next, maxHold: maxHold)
        }
        _ = state.finish(fifth, response: try x(remaining: 1, reset: 1_800_000_003), now: next, maxHold: maxHold)
        guard case .wait(let until, false) = state.decide(now: next, declared: nil, learnsFirst: true, maxHold: maxHold) else {
            Issue.record("more calls went than the new window holds")
            return
        }
        #expect(abs(until.timeIntervalSince1970 - 1_800_000_003) < 0.01)
    }

    @Test("answers that name the next window (calls that reached the server late) move the limiter to it")
    func nextWindowEarly() throws {
        let start = Date(timeIntervalSince1970: 1_800_000_000.3)
        var state = LimiterState()
        let probe = try go(&state, at: start)
        _ = state.finish(probe, response: try x(remaining: 4, reset: 1_800_000_001), now: start, maxHold: maxHold)
        let calls = try (0..<4).map { _ in try go(&state, at: start) }
        // The server's window had ended already: the four opened the next, ending a second later.
        let later = start.addingTimeInterval(0.5)
        for (index, ticket) in calls.enumerated() {
            _ = state.finish(ticket, response: try x(remaining: 4 - index, reset: 1_800_000_002), now: later, maxHold: maxHold)
        }
        // One is left in that window, not five at 1_800_000_001.
        let atOldEnd = Date(timeIntervalSince1970: 1_800_000_001.01)
        _ = try go(&state, at: atOldEnd)
        guard case .wait(let until, false) = state.decide(now: atOldEnd, declared: nil, learnsFirst: true, maxHold: maxHold) else {
            Issue.record("the limiter went on counting a window the server had left")
            return
        }
        #expect(abs(until.timeIntervalSince1970 - 1_800_000_002) < 0.01)
    }

    @Test("a reset past maxHold, and a hold past it after the clock stepped back, wait maxHold at most")
    func capped() throws {
        var state = LimiterState()
        let now = Date()
        let ticket = try go(&state, at: now)
        _ = state.finish(ticket, response: try answer(["RateLimit": #""p";r=0;t=31536000"#]), now: now, maxHold: maxHold)
        guard case .wait(let until, _) = state.decide(now: now, declared: nil, learnsFirst: true, maxHold: maxHold) else {
            Issue.record("the spent quota let a call through")
            return
        }
        #expect(until <= now.addingTimeInterval(60))
        let stepBack = now.addingTimeInterval(-3600)
        guard case .wait(let again, _) = state.decide(now: stepBack, declared: nil, learnsFirst: true, maxHold: maxHold) else {
            Issue.record("a call went")
            return
        }
        #expect(again <= stepBack.addingTimeInterval(60))
    }

    @Test("a reset past maxHold is not a quota restored: when the cap passes, one call goes to learn again")
    func cappedReset() throws {
        var state = LimiterState()
        let now = Date()
        let ticket = try go(&state, at: now)
        _ = state.finish(
            ticket, response: try answer(["RateLimit-Policy": #""hour";q=5000;w=3600"#, "RateLimit": #""hour";r=0;t=3540"#]), now: now,
            maxHold: maxHold)
        let later = now.addingTimeInterval(61)
        _ = try go(&state, at: later)  // the one that learns
        guard case .waitForNews(_, true) = state.decide(now: later, declared: nil, learnsFirst: true, maxHold: maxHold) else {
            Issue.record("the cap gave back the whole quota")
            return
        }
    }

    @Test("a 429 that says when nothing holds the origin a second; one whose fields say when does not need to")
    func silent429() throws {
        var state = LimiterState()
        let now = Date()
        let ticket = try go(&state, at: now)
        #expect(state.finish(ticket, response: try answer(["RateLimit": #""p";r=0"#], status: .tooManyRequests), now: now, maxHold: maxHold) == .seconds(1))
        var other = LimiterState()
        let second = try go(&other, at: now)
        #expect(other.finish(second, response: try answer(["RateLimit": #""p";r=0;t=4"#], status: .tooManyRequests), now: now, maxHold: maxHold) == nil)
    }
}

@Suite("RateLimitMiddleware: the first call's answer is awaited only briefly")
struct LearningWaitTests {
    @Test("a first call that does not answer holds the next one only for the learning wait")
    func slowFirst() async throws {
        let transport = MockTransport()
        let arrived = AsyncStream<Void>.makeStream(), release = AsyncStream<Void>.makeStream()
        transport.on(nil, "slow") { request throws(CatenaError) in
            arrived.continuation.yield()
            for await _ in release.stream { break }
            return APIResponse(status: .ok, request: request)
        }
        transport.on(nil, "fast", status: .ok)
        // A virtual clock: the learning wait passes at once.
        final class Instant: RetryClock {
            func now() -> Date { Date() }
            func sleep(for duration: Duration) async throws { try Task.checkCancellation() }
        }
        let chain = RateLimitMiddleware(clock: Instant()) --> transport
        let slow = Task { try await chain.load(try APIRequest(urlString: "https://api.example/slow")) }
        var arrivals = arrived.stream.makeAsyncIterator()
        await arrivals.next()
        #expect(try await chain.load(try APIRequest(urlString: "https://api.example/fast")).status == .ok)
        release.continuation.yield()
        #expect(try await slow.value.status == .ok)
    }
}
