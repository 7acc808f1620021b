import Catena
import CatenaAsyncHTTPClient
import CatenaTesting
import Foundation
import HTTPTypes
import Synchronization
import Testing
@testable import CatenaTestSupport

@Suite("RetryMiddleware")
struct RetryMiddlewareTests {
    func flaky(
        _ key: String, failures: Int, status: Int = 503, method: HTTPRequest.Method = .get, extra: [URLQueryItem] = [], body: APIRequest.Body = .empty
    ) throws -> APIRequest {
        try APIRequest(
            method, path: ["api", "flaky"],
            query: [
                URLQueryItem(name: "key", value: key), URLQueryItem(name: "failures", value: String(failures)),
                URLQueryItem(name: "status", value: String(status)),
            ] + extra, body: body)
    }

    struct Call: Decodable { let call: Int }

    func chain(_ strategy: RetryStrategy = RetryStrategy(jitter: false), clock: VirtualClock, counter: Counter = Counter()) async throws -> some HTTPLoader {
        EnvironmentMiddleware(try await TestServer.environment()) --> RetryMiddleware(strategy, clock: clock) --> counter
            --> AsyncHTTPClientTransport.forTests()
    }

    @Test("each retryable status is retried with exponential backoff", arguments: [408, 429, 500, 502, 503, 504])
    func retryableStatuses(status: Int) async throws {
        let clock = VirtualClock()
        let response = try await chain(clock: clock).load(try flaky(uniqueKey(), failures: 2, status: status))
        #expect(response.status == .ok)
        #expect(try response.decode(Call.self).call == 3)
        #expect(response.request[option: RetryAttempt.self] == 3, "the response tells which attempt it came from")
        #expect(clock.waits == [.milliseconds(200), .milliseconds(400)])
    }

    @Test("other statuses and POST are not retried by default")
    func notRetried() async throws {
        let clock = VirtualClock()
        let counter = Counter()
        let chain = try await chain(clock: clock, counter: counter)
        #expect(try await chain.load(try flaky(uniqueKey(), failures: 1, status: 501)).status.code == 501)
        #expect(try await chain.load(try flaky(uniqueKey(), failures: 1, method: .post)).status.code == 503)
        #expect(counter.count.load(ordering: .relaxed) == 2)
        #expect(clock.waits.isEmpty)
    }

    @Test("the last retryable response is returned after the maximum number of attempts")
    func maxAttempts() async throws {
        let clock = VirtualClock()
        let counter = Counter()
        let response = try await chain(RetryStrategy(maxAttempts: 4, jitter: false), clock: clock, counter: counter)
            .load(try flaky(uniqueKey(), failures: 10))
        #expect(response.status.code == 503)
        #expect(counter.count.load(ordering: .relaxed) == 4)
        #expect(clock.waits == [.milliseconds(200), .milliseconds(400), .milliseconds(800)])
    }

    @Test("Retry-After in seconds and as an HTTP date is honoured; beyond the cap there is no retry")
    func retryAfter() async throws {
        let seconds = VirtualClock()
        #expect(
            try await chain(clock: seconds).load(try flaky(uniqueKey(), failures: 1, status: 429, extra: [URLQueryItem(name: "retry_after", value: "7")]))
                .status == .ok)
        #expect(seconds.waits == [.seconds(7)])

        let date = VirtualClock()
        #expect(
            try await chain(clock: date).load(try flaky(uniqueKey(), failures: 1, status: 503, extra: [URLQueryItem(name: "retry_after_date", value: "30")]))
                .status == .ok)
        let wait = try #require(date.waits.first)
        // 30 s after the server wrote the date (to the second), less the time the
        // answer took to arrive and be read (seconds under ThreadSanitizer).
        #expect(wait >= .seconds(30) - Timing.stretch(.seconds(2)) && wait <= .seconds(31), "waited \(wait)")

        let tooLong = VirtualClock()
        let counter = Counter()
        let response = try await chain(clock: tooLong, counter: counter).load(
            try flaky(uniqueKey(), failures: 1, status: 429, extra: [URLQueryItem(name: "retry_after", value: "86400")]))
        #expect(response.status == .tooManyRequests)
        #expect(tooLong.waits.isEmpty)
        #expect(counter.count.load(ordering: .relaxed) == 1)
    }

    @Test("full jitter draws each backoff between zero and its exponential value")
    func jitter() async throws {
        let clock = VirtualClock()
        let uppers = Locked<[Double]>([])
        let chain =
            EnvironmentMiddleware(try await TestServer.environment())
            --> RetryMiddleware(.standard, clock: clock) { upper in
                uppers.withLock { $0.append(upper) }; return upper / 2
            }
            --> AsyncHTTPClientTransport.forTests()
        #expect(try await chain.load(try flaky(uniqueKey(), failures: 2)).status == .ok)
        #expect(uppers.withLock { $0 } == [0.2, 0.4])
        #expect(clock.waits == [.milliseconds(100), .milliseconds(200)])
    }

    @Test("a refused connection is retried, then reported")
    func refusedConnection() async throws {
        let port = try await TestServer.closedPort()
        let clock = VirtualClock()
        let counter = Counter()
        let chain = RetryMiddleware(RetryStrategy(jitter: false), clock: clock) --> counter --> AsyncHTTPClientTransport.forTests()
        let error = await #expect(throws: CatenaError.self) { try await chain.load(try APIRequest(.get, urlString: "http://127.0.0.1:\(port)/")) }
        #expect(error?.code == .cannotConnect)
        #expect(counter.count.load(ordering: .relaxed) == 3)
        #expect(clock.waits.count == 2)
    }

    @Test("cancelled and reset-in-progress are never retried")
    func neverRetriesCancel() async throws {
        for code in [CatenaError.Code.cancelled, .resetInProgress] {
            let mock = MockTransport()
            mock.fail(code)
            mock.respond(status: .ok)
            let clock = VirtualClock()
            let strategy = RetryStrategy(errorCodes: [.cannotConnect, .cancelled, .resetInProgress])
            let error = await #expect(throws: CatenaError.self) {
                try await (RetryMiddleware(strategy, clock: clock) --> mock).load(try APIRequest(.get, urlString: "http://example.com/"))
            }
            #expect(error?.code == code)
            #expect(mock.requests.count == 1)
        }
    }

    @Test("each attempt produces the body afresh")
    func bodyProducedPerAttempt() async throws {
        let produced = Atomic<Int>(0)
        let body = APIRequest.Body(kind: "counted", contentType: "text/plain") {
            produced.add(1, ordering: .relaxed)
            return Data("attempt".utf8)
        }
        let clock = VirtualClock()
        let response = try await chain(clock: clock).load(try flaky(uniqueKey(), failures: 2, method: .put, body: body))
        #expect(response.status == .ok)
        #expect(produced.load(ordering: .relaxed) == 3)
    }

    @Test("cancelling while waiting to retry ends the wait at once")
    func cancelDuringBackoff() async throws {
        // The real clock, telling when the backoff has begun: the cancel lands in it.
        final class SignallingClock: RetryClock {
            let waiting = Locked(false)
            func now() -> Date { Date() }
            func sleep(for duration: Duration) async throws {
                waiting.withLock { $0 = true }
                try await Task.sleep(for: duration)
            }
        }
        let clock = SignallingClock()
        let chain =
            EnvironmentMiddleware(try await TestServer.environment())
            --> RetryMiddleware(RetryStrategy(baseDelay: .seconds(30), jitter: false), clock: clock) --> AsyncHTTPClientTransport.forTests()
        let task = Task { try await chain.load(try flaky(uniqueKey(), failures: 1)) }
        #expect(await Timing.eventually { clock.waiting.withLock { $0 } }, "the retry began its backoff")
        let cancelledAt = ContinuousClock.now
        task.cancel()
        #expect(((await task.result).failure as? CatenaError)?.code == .cancelled)
        #expect(ContinuousClock.now - cancelledAt < Timing.stretch(.seconds(3)))
    }
}
