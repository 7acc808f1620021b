@testable import Catena
import CatenaAsyncHTTPClient
import Foundation
import Testing
@testable import CatenaTestSupport

/// Streamed responses through chains, on both transports, against the demo server.
@Suite("Streaming", .serialized)
struct StreamingTests {
    func drip(chunks: Int, interval: Double) throws -> APIRequest {
        try APIRequest(
            .get, path: ["api", "drip"],
            query: [
                URLQueryItem(name: "chunks", value: String(chunks)), URLQueryItem(name: "interval", value: String(interval)),
            ])
    }

    @Test("the first part reaches the caller while the server still holds back the rest", arguments: TransportKind.withHTTPS)
    func incremental(kind: TransportKind) async throws {
        let chain = try await kind.chain()
        let key = uniqueKey()
        let opened = Catena.Locked(false)
        // The server sends "first", then waits for the gate; a fail-safe opens it after
        // 30 s so that a transport that buffers fails the test instead of hanging it.
        let failSafe = Task {
            try await Task.sleep(for: .seconds(30))
            opened.withLock { $0 = true }
            _ = try await chain.load(try APIRequest(.post, path: ["api", "gated", "open"], query: [URLQueryItem(name: "key", value: key)]))
        }
        let response = try await chain.stream(try APIRequest(.get, path: ["api", "gated"], query: [URLQueryItem(name: "key", value: key)]))
        var iterator = response.body.makeAsyncIterator()
        let first = try await iterator.next()
        #expect(first == Data("first".utf8))
        #expect(!opened.withLock { $0 }, "the first part arrived only after the server sent the rest")
        failSafe.cancel()
        _ = try await chain.load(try APIRequest(.post, path: ["api", "gated", "open"], query: [URLQueryItem(name: "key", value: key)]))
        var rest = Data()
        while let chunk = try await iterator.next() { rest.append(chunk) }
        #expect(rest == Data("rest".utf8))
    }

    @Test("collecting a stream gives what load gives, compressed bodies included", arguments: TransportKind.withHTTPS)
    func collectEqualsLoad(kind: TransportKind) async throws {
        let chain = try await kind.chain()
        for request in [
            try APIRequest(.get, path: ["api", "users"], query: [URLQueryItem(name: "per_page", value: "12")]),
            try APIRequest(.get, path: ["api", "bytes", "300000"]),
        ] {
            let loaded = try await chain.load(request)
            let collected = try await chain.stream(request).collect()
            #expect(collected.status == loaded.status)
            #expect(collected.body == loaded.body)
            #expect(!collected.body.isEmpty)
        }
    }

    @Test("leaving the loop cancels the request and frees its throttle slot at once", arguments: TransportKind.allCases)
    func leavingCancels(kind: TransportKind) async throws {
        let throttle = ThrottleMiddleware(maxInFlight: 1)
        let chain = EnvironmentMiddleware(try await TestServer.environment()) --> throttle --> kind.make()
        let ended = Catena.Locked<CatenaError.Code?>(nil)
        // 100 chunks, 10 s and more: read one, then leave the loop (the response itself
        // stays in scope: leaving the loop is what ends it).
        let response = try await chain.stream(try drip(chunks: 100, interval: Timing.stretch(0.1)))
        response.body.whenEnded { _, error in ended.withLock { $0 = error?.code ?? .unknown } }
        for try await _ in response.body { break }
        #expect(await Timing.eventually(within: .seconds(2)) { ended.withLock { $0 } == .cancelled })
        // The next stream needs the only slot: it gets it at once, or the test fails
        // (and frees it) instead of hanging.
        let done = Catena.Locked(false)
        let next = Task {
            defer { done.withLock { $0 = true } }
            return try await chain.stream(try APIRequest(.get, path: ["api", "users", "2"])).collect()
        }
        let freed = await Timing.eventually(within: .seconds(3)) { done.withLock { $0 } }
        #expect(freed, "the slot was still held by the stream whose loop was left")
        if !freed { next.cancel() }
        if case .success(let collected) = await next.result { #expect(collected.status == .ok) }
        _ = response
    }

    @Test(
        "RetryMiddleware above ThrottleMiddleware(maxInFlight: 1): a retried stream does not wait forever for the slot its 503 held",
        arguments: TransportKind.allCases)
    func retryAboveThrottle(kind: TransportKind) async throws {
        let throttle = ThrottleMiddleware(maxInFlight: 1)
        let chain =
            EnvironmentMiddleware(try await TestServer.environment())
            --> RetryMiddleware(RetryStrategy(baseDelay: .milliseconds(10), jitter: false)) --> throttle --> kind.make()
        let done = Catena.Locked(false)
        let call = Task {
            defer { done.withLock { $0 = true } }
            return try await chain.stream(try RetryMiddlewareTests().flaky(uniqueKey(), failures: 1)).collect()
        }
        let finished = await Timing.eventually(within: .seconds(5)) { done.withLock { $0 } }
        #expect(finished, "the retry waited for the slot the discarded 503 still held")
        if !finished { await throttle.reset() }
        if case .success(let response) = await call.result { #expect(response.status == .ok) }
    }

    @Test("a reset cancels a stream whose body is still being read", arguments: TransportKind.allCases)
    func resetCancelsStreams(kind: TransportKind) async throws {
        let guardLoader = ResetGuardMiddleware()
        let chain = guardLoader --> EnvironmentMiddleware(try await TestServer.environment()) --> kind.make()
        let response = try await chain.stream(try drip(chunks: 100, interval: Timing.stretch(0.1)))
        let ended = Catena.Locked<CatenaError.Code?>(nil)
        response.body.whenEnded { _, error in ended.withLock { $0 = error?.code ?? .unknown } }
        #expect(guardLoader.inFlight == 1)
        await chain.reset()
        #expect(ended.withLock { $0 } == .cancelled)
        #expect(guardLoader.inFlight == 0)
        await #expect(throws: CatenaError.self) { for try await _ in response.body {} }
    }

    @Test("a stream's timeout covers its head only: a late head times out, a body that outlasts the timeout streams on", arguments: TransportKind.withHTTPS)
    func headTimeout(kind: TransportKind) async throws {
        let chain = try await kind.chain(timeout: Timing.stretch(.milliseconds(800)))
        let late = try APIRequest(.get, path: ["api", "users", "2"], query: [URLQueryItem(name: "delay", value: String(Timing.stretch(4.0)))])
        let start = ContinuousClock.now
        let error = await #expect(throws: CatenaError.self) { _ = try await chain.stream(late) }
        #expect(error?.code == .timedOut)
        #expect(ContinuousClock.now - start < Timing.stretch(.seconds(3)), "it ended at its timeout, not when the server answered")
        // Four parts 0.5 s apart under a 1 s timeout: the body outlasts the timeout. A chain
        // of its own, so that the head (which the timeout does cover) has room to arrive
        // on a loaded machine: a sanitized full suite once held URLSession's head back
        // past 6.4 s.
        let patient = try await kind.chain(timeout: Timing.stretch(.seconds(1)))
        let response = try await patient.stream(try drip(chunks: 4, interval: Timing.stretch(0.5)))
        #expect(try await response.collect().body == Data("....".utf8))
    }

    @Test("cancelling a stream that waits for its head ends it at once, cancelled", arguments: TransportKind.withHTTPS)
    func cancelBeforeHead(kind: TransportKind) async throws {
        let chain = try await kind.chain()
        let request = try APIRequest(.get, path: ["api", "users", "2"], query: [URLQueryItem(name: "delay", value: String(Timing.stretch(5.0)))])
        let call = Task { try await chain.stream(request) }
        try await Task.sleep(for: .milliseconds(200))
        let start = ContinuousClock.now
        call.cancel()
        let result = await call.result
        #expect(ContinuousClock.now - start < Timing.stretch(.seconds(1)), "it did not wait for the server's head")
        #expect(throws: CatenaError.self) { _ = try result.get() }
        if case .failure(let error) = result { #expect((error as? CatenaError)?.code == .cancelled, "\(error)") }
    }

    @Test("a body silent for longer than the idle timeout fails with timedOut", arguments: TransportKind.withHTTPS)
    func idleTimeout(kind: TransportKind) async throws {
        let chain = try await kind.chain()
        var request = try drip(chunks: 3, interval: Timing.stretch(2))
        request[option: StreamIdleTimeout.self] = Timing.stretch(.milliseconds(500))
        let response = try await chain.stream(request)
        #expect(response.status == .ok)
        let error = await #expect(throws: CatenaError.self) { for try await _ in response.body {} }
        #expect(error?.code == .timedOut)
        #expect(error?.detail?.contains("sent nothing") == true)
    }

    @Test("a slow reader holds the transfer to a bounded window", arguments: TransportKind.withHTTPS)
    func boundedWindow(kind: TransportKind) async throws {
        let chain = try await kind.chain()
        var request = try APIRequest(.get, path: ["api", "bytes", String(8 * 1024 * 1024)])
        request[option: StreamWindow.self] = 64 * 1024
        let response = try await chain.stream(request)
        var bytes = 0
        var chunks = 0
        do {
            for try await chunk in response.body {
                bytes += chunk.count
                chunks += 1
                if chunks % 16 == 0 { try await Task.sleep(for: .milliseconds(2)) }
            }
            #expect(bytes == 8 * 1024 * 1024)
        } catch {
            // corelibs URLSession cannot pause a transfer: its memory is bounded by
            // failing a reader that falls too far behind.
            #expect(kind == .urlSession, "\(error)")
            #expect((error as? CatenaError)?.detail?.contains("cannot pause") == true)
        }
        let peak = response.body.reader.peakBuffered
        switch kind {
        case .asyncHTTPClient, .asyncHTTPClientHTTPS:
            // The window, plus what was already on its way when the reads paused.
            #expect(peak <= 64 * 1024 + 512 * 1024, "held \(peak) bytes unread")
        case .urlSession:
            #expect(peak <= 4 * 1024 * 1024, "held \(peak) bytes unread")
        }
    }

    @Test("through TokenAuthMiddleware: a 401 head refreshes the token and the stream comes from the resend", arguments: TransportKind.allCases)
    func authRefresh(kind: TransportKind) async throws {
        let auth = TokenAuthMiddleware(
            hosts: [try await TestServer.authority()], token: BearerToken(accessToken: "not-a-live-token"),
            refresh: try await AuthTests().oauth())
        let chain = EnvironmentMiddleware(try await TestServer.environment()) --> RetryMiddleware() --> auth --> kind.make()
        let response = try await chain.stream(try APIRequest(.get, path: ["api", "protected", "me"]))
        #expect(response.status == .ok)
        let body = try await response.collect().body
        #expect(String(decoding: body, as: UTF8.self).contains("eve.holt@reqres.in"))
        #expect(auth.refreshCount == 1)
    }

    @Test("the log loader logs the head at once and the size when the body ends")
    func logged() async throws {
        let logs = CapturedLogs()
        let chain =
            EnvironmentMiddleware(try await TestServer.environment()) --> LogMiddleware(logger: logs.logger(level: .debug))
            --> AsyncHTTPClientTransport.forTests()
        let response = try await chain.stream(try drip(chunks: 5, interval: 0.01))
        #expect(logs.all.contains { $0.text.hasPrefix("← 200") })
        #expect(!logs.all.contains { $0.text.contains("body complete") })
        for try await _ in response.body {}
        #expect(logs.all.contains { $0.text.contains("body complete, 5 bytes") }, "\(logs.text)")
    }
}
