import Catena
import Foundation
import HTTPTypes
import Testing
@testable import CatenaTestSupport

/// RFC 9111's and RFC 5861's rules, one test per rule, named for its section, against the
/// demo server's `/api/cache/{key}` (whose query sets the answer's fields).
@Suite("CacheMiddleware: RFC 9111 and RFC 5861, rule by rule")
struct CacheRulesTests {
    static func chain(_ cache: CacheMiddleware, _ kind: TransportKind = .asyncHTTPClient) async throws -> any HTTPLoader {
        EnvironmentMiddleware(try await TestServer.environment()) --> cache --> kind.make()
    }

    static func asking(_ request: APIRequest, _ directives: String) -> APIRequest {
        var request = request
        request.headerFields[.cacheControl] = directives
        return request
    }

    static func setFailing(_ key: String, _ on: Bool) async throws {
        _ = try await TransportKind.asyncHTTPClient.chain().load(
            try APIRequest(.post, path: ["api", "cache-fail", key], query: [URLQueryItem(name: "on", value: on ? "1" : "0")]))
    }

    @Test("9111 §4.2.2: without max-age or Expires, a tenth of the time since Last-Modified, at most a day", arguments: TransportKind.allCases)
    func heuristicFreshness(kind: TransportKind) async throws {
        let clock = TestClock()
        let cache = CacheMiddleware(now: clock.read)
        let chain = try await Self.chain(cache, kind)
        // Unchanged for 100 s when sent: fresh for 10 s.
        let recent = uniqueKey()
        let request = try cacheRequest(recent, ["modified_ago": "100"])
        _ = try await chain.load(request)
        clock.advance(5)
        _ = try await chain.load(request)
        #expect(cache.statistics.hits == 1, "5 s into 10")
        clock.advance(10)
        _ = try await chain.load(request)
        #expect(cache.statistics.revalidated == 1, "15 s: past a tenth of 100 s")
        #expect(try await cacheStats(recent) == CacheStats(full: 1, notModified: 1))

        // Unchanged for months: fresh for a day, not for weeks.
        let old = try cacheRequest(uniqueKey())
        _ = try await chain.load(old)
        clock.advance(86_000)
        _ = try await chain.load(old)
        #expect(cache.statistics.hits == 2, "within the day")
        clock.advance(500)
        _ = try await chain.load(old)
        #expect(cache.statistics.revalidated == 2, "past the day")

        // An explicit lifetime, even 0, leaves no room for the heuristic.
        let explicit = uniqueKey()
        let zero = try cacheRequest(explicit, ["max_age": "0"])
        _ = try await chain.load(zero)
        _ = try await chain.load(zero)
        #expect(try await cacheStats(explicit) == CacheStats(full: 1, notModified: 1))
    }

    @Test("9111 §4.1: Vary compares the fields it names with whitespace and case normalised, not their order", arguments: TransportKind.allCases)
    func varyNormalised(kind: TransportKind) async throws {
        let cache = CacheMiddleware()
        let chain = try await Self.chain(cache, kind)
        let key = uniqueKey()
        let asking = { (language: String) in try cacheRequest(key, ["max_age": "60", "vary": "Accept-Language"], headers: [.acceptLanguage: language]) }
        _ = try await chain.load(try asking("en-US, fr;q=0.5"))
        _ = try await chain.load(try asking("en-us,fr; q=0.5 "))
        #expect(cache.statistics.hits == 1, "the same list, spaced and cased otherwise")
        _ = try await chain.load(try asking("fr;q=0.5, en-US"))
        #expect(cache.statistics.hits == 1 && cache.statistics.misses == 2, "another order is another value")
        #expect(try await cacheStats(key) == CacheStats(full: 2, notModified: 0))
    }

    @Test(
        "9111 §4.3.5: a HEAD's 200 refreshes the stored GET when its ETag agrees, and drops it when it does not or has none", arguments: TransportKind.allCases)
    func headUpdatesGet(kind: TransportKind) async throws {
        let clock = TestClock()
        let cache = CacheMiddleware(now: clock.read)
        let chain = try await Self.chain(cache, kind)
        let key = uniqueKey()
        // `size`: a change keeps the body's length, so only the ETag can tell it.
        let get = try cacheRequest(key, ["max_age": "60", "size": "64"])
        var head = get
        head.method = .head
        let first = try await chain.load(get)
        clock.advance(50)
        #expect(try await chain.load(head).status == .ok)
        clock.advance(30)  // 80 s after the GET, 30 s after the HEAD that refreshed it
        let hit = try await chain.load(get)
        #expect(cache.statistics.hits == 1 && ageIsAbout(hit, 30), "refreshed by the HEAD: \(hit.headerFields[.age] ?? "no Age")")

        // The resource changes, its length not: the HEAD's ETag disagrees, and the stored GET goes.
        _ = try await TransportKind.asyncHTTPClient.chain().load(try APIRequest(.post, path: ["api", "cache-change", key]))
        _ = try await chain.load(head)
        let fresh = try await chain.load(get)
        #expect(fresh.body.count == first.body.count && fresh.body != first.body, "the new body, not the dropped entry")
        #expect(try await cacheStats(key) == CacheStats(full: 2, notModified: 0))

        // Nothing to compare (no ETag, no Last-Modified): no evidence, so dropped, not refreshed.
        let bare = uniqueKey()
        let plain = try cacheRequest(bare, ["max_age": "60", "etag": "0", "last_modified": "0"])
        var plainHead = plain
        plainHead.method = .head
        _ = try await chain.load(plain)
        _ = try await chain.load(plainHead)
        _ = try await chain.load(plain)
        #expect(try await cacheStats(bare) == CacheStats(full: 2, notModified: 0))
    }

    @Test("9111 §3 and §3.3: a 206 partial answer is not stored, whole or in part; a private one is, for who asked")
    func partialAndPrivate() async throws {
        let cache = CacheMiddleware()
        let origin = ScriptedOrigin { request in
            guard request.headerFields[.range] == nil else {
                return APIResponse(
                    status: .partialContent, headerFields: [.cacheControl: "max-age=60", .contentRange: "bytes 0-3/10", .eTag: "\"p\""],
                    body: Data("body".utf8), request: request)
            }
            return APIResponse(status: .ok, headerFields: [.cacheControl: "private, max-age=60"], body: Data("whole".utf8), request: request)
        }
        let chain = cache --> origin
        var ranged = try APIRequest(.get, urlString: "http://127.0.0.1:9/partial")
        ranged.headerFields[.range] = "bytes=0-3"
        _ = try await chain.load(ranged)
        #expect(cache.usage.entries == 0 && cache.statistics.stored == 0, "a 206 is not stored")
        let whole = try APIRequest(.get, urlString: "http://127.0.0.1:9/private")
        _ = try await chain.load(whole)
        _ = try await chain.load(whole)
        #expect(cache.statistics.hits == 1, "private: this cache's to keep")
    }

    @Test(
        "9111 §3.2 and §4.3.4: a 304 or a HEAD that says no-store, names other Vary fields or brings another ETag drops the entry; split lines are read whole")
    func refreshMayDrop() async throws {
        let cache = CacheMiddleware()
        let request = try APIRequest(.get, urlString: "http://127.0.0.1:9/thing")
        var head = request
        head.method = .head
        typealias Case = (method: HTTPRequest.Method, stored: [(String, String)], answer: [(String, String)], kept: Bool)
        let tagged = [("ETag", "\"a\""), ("Cache-Control", "max-age=0")]
        let cases: [Case] = [
            (.head, tagged, [("ETag", "\"a\""), ("Cache-Control", "max-age=60, no-store")], false),
            (.head, tagged, [("ETag", "\"a\""), ("Vary", "Accept")], false),
            (.get, tagged, [("ETag", "\"a\""), ("Cache-Control", "no-store")], false),
            (.get, tagged, [("ETag", "\"a\""), ("Vary", "Accept-Language")], false),
            (.get, tagged, [("ETag", "\"b\"")], false),
            (.get, tagged, [("ETag", "W/\"a\"")], true),
            // A second Cache-Control line says no-store: read whole, it is.
            (.get, tagged, [("ETag", "\"a\""), ("Cache-Control", "no-store"), ("Cache-Control", "max-age=0")], false),
            // Vary on two lines, as nginx's gzip_vary adds its own: the same fields, kept.
            (.get, tagged + [("Vary", "Accept"), ("Vary", "Accept-Encoding")], [("ETag", "\"a\""), ("Vary", "Accept"), ("Vary", "Accept-Encoding")], true),
            // Only Last-Modified stored: a HEAD bringing an ETag cannot say it is this body's.
            (
                .head, [("Last-Modified", "Sun, 01 Nov 2026 00:00:00 GMT"), ("Cache-Control", "max-age=0")],
                [("Last-Modified", "Sun, 01 Nov 2026 00:00:00 GMT"), ("ETag", "\"new\"")], false
            ),
        ]
        for (index, item) in cases.enumerated() {
            let fields = { @Sendable (pairs: [(String, String)]) in HTTPFields(pairs.map { HTTPField(name: HTTPField.Name($0.0)!, value: $0.1) }) }
            let (stored, answer) = (fields(item.stored), fields(item.answer))
            let origin = ScriptedOrigin { request in
                let conditional = request.headerFields[.ifNoneMatch] != nil || request.headerFields[.ifModifiedSince] != nil
                guard request.method == item.method, request.method == .head || conditional else {
                    return APIResponse(status: .ok, headerFields: stored, body: Data("body".utf8), request: request)
                }
                return APIResponse(status: item.method == .head ? .ok : .notModified, headerFields: answer, body: Data(), request: request)
            }
            let chain = cache --> origin
            await cache.reset()
            _ = try await chain.load(request)
            #expect(cache.usage.entries == 1)
            _ = try await chain.load(item.method == .head ? head : request)
            #expect(cache.usage.entries == (item.kept ? 1 : 0), "case \(index): \(item.method) \(item.answer)")
        }
    }

    @Test("9111 §4.2.3: an Age from upstream counts toward the answer's age")
    func ageCounts() async throws {
        let clock = TestClock()
        let cache = CacheMiddleware(now: clock.read)
        let chain = try await Self.chain(cache)
        let key = uniqueKey()
        let request = try cacheRequest(key, ["max_age": "60", "age": "50"])
        _ = try await chain.load(request)
        clock.advance(5)
        let hit = try await chain.load(request)
        #expect(hit.headerFields[.age] == "55")
        clock.advance(10)  // 65 s old: stale
        _ = try await chain.load(request)
        #expect(cache.statistics.hits == 1 && cache.statistics.revalidated == 1)
        #expect(try await cacheStats(key) == CacheStats(full: 1, notModified: 1))
    }

    @Test("9111 §4.2.3: a Date further back than the arrival makes the answer that much older")
    func dateCounts() async throws {
        // Hummingbird and nginx stamp the present: an origin whose clock is 50 s behind.
        let clock = TestClock()
        let cache = CacheMiddleware(now: clock.read)
        let origin = DatedLoader(behind: 50)
        let chain = cache --> origin
        let request = try APIRequest(.get, urlString: "http://127.0.0.1:9/dated")
        _ = try await chain.load(request)
        let hit = try await chain.load(request)
        let age = try #require(Int(hit.headerFields[.age] ?? ""))
        #expect((49...51).contains(age), "the Date's 50 s: \(age)")
        clock.advance(15)
        _ = try await chain.load(request)
        #expect(origin.calls.withLock { $0 } == 2, "about 65 s old: stale, fetched again")
        #expect(cache.statistics.hits == 1 && cache.statistics.misses == 2)
    }

    @Test("9111 §5.2.1.1: the request's max-age sends an older answer to the origin; max-age=0 always", arguments: TransportKind.allCases)
    func requestMaxAge(kind: TransportKind) async throws {
        let clock = TestClock()
        let cache = CacheMiddleware(now: clock.read)
        let chain = try await Self.chain(cache, kind)
        let key = uniqueKey()
        let request = try cacheRequest(key, ["max_age": "60"])
        _ = try await chain.load(request)
        clock.advance(30)
        _ = try await chain.load(Self.asking(request, "max-age=40"))
        #expect(cache.statistics.hits == 1)
        _ = try await chain.load(Self.asking(request, "max-age=10"))
        #expect(cache.statistics.revalidated == 1)
        _ = try await chain.load(Self.asking(request, "max-age=0"))
        #expect(cache.statistics.revalidated == 2)
        #expect(try await cacheStats(key) == CacheStats(full: 1, notModified: 2))
    }

    @Test("9111 §5.2.1.3: min-fresh asks for an answer that stays fresh that long still")
    func minFresh() async throws {
        let clock = TestClock()
        let cache = CacheMiddleware(now: clock.read)
        let chain = try await Self.chain(cache)
        let request = try cacheRequest(uniqueKey(), ["max_age": "60"])
        _ = try await chain.load(request)
        clock.advance(30)
        _ = try await chain.load(Self.asking(request, "min-fresh=20"))
        #expect(cache.statistics.hits == 1)
        _ = try await chain.load(Self.asking(request, "min-fresh=40"))
        #expect(cache.statistics.revalidated == 1)
    }

    @Test("9111 §5.2.1.2 and §5.2.2.2: max-stale takes a stale answer without the origin, unless it says must-revalidate", arguments: TransportKind.allCases)
    func maxStale(kind: TransportKind) async throws {
        let clock = TestClock()
        let cache = CacheMiddleware(now: clock.read)
        let chain = try await Self.chain(cache, kind)
        let key = uniqueKey()
        let request = try cacheRequest(key, ["max_age": "10"])
        _ = try await chain.load(request)
        clock.advance(30)  // stale by 20 s
        let stale = try await chain.load(Self.asking(request, "max-stale=30"))
        #expect(stale.status == .ok && ageIsAbout(stale, 30))
        _ = try await chain.load(Self.asking(request, "max-stale"))
        #expect(cache.statistics.stale == 2)
        #expect(try await cacheStats(key) == CacheStats(full: 1, notModified: 0))
        _ = try await chain.load(Self.asking(request, "max-stale=10"))
        #expect(try await cacheStats(key) == CacheStats(full: 1, notModified: 1), "stale by 20 s is more than 10")

        let strict = try cacheRequest(uniqueKey(), ["max_age": "10", "must_revalidate": "1"])
        _ = try await chain.load(strict)
        clock.advance(30)
        _ = try await chain.load(Self.asking(strict, "max-stale"))
        #expect(cache.statistics.stale == 2, "must-revalidate: never served stale")
    }

    @Test("9111 §5.2.1.7: only-if-cached answers from the cache or with 504, never from the network", arguments: TransportKind.allCases)
    func onlyIfCached(kind: TransportKind) async throws {
        let cache = CacheMiddleware()
        let chain = try await Self.chain(cache, kind)
        let key = uniqueKey()
        let request = try cacheRequest(key, ["max_age": "60"])
        let none = try await chain.load(Self.asking(request, "only-if-cached"))
        #expect(none.status == .gatewayTimeout)
        #expect(String(decoding: none.body, as: UTF8.self).contains("only-if-cached"))
        #expect(try await cacheStats(key) == CacheStats(full: 0, notModified: 0))
        _ = try await chain.load(request)
        let stored = try await chain.load(Self.asking(request, "only-if-cached"))
        #expect(stored.status == .ok)
        #expect(cache.statistics.unavailable == 1 && cache.statistics.hits == 1)
        // A stream, too, never reaches the network.
        let streamed = try await chain.stream(Self.asking(try cacheRequest(uniqueKey(), ["max_age": "60"]), "only-if-cached"))
        #expect(streamed.status == .gatewayTimeout)
        #expect(try await cacheStats(key) == CacheStats(full: 1, notModified: 0))
    }

    @Test("CacheOffline: any age, no network; never no-cache or must-revalidate answers; 504 with nothing stored")
    func offline() async throws {
        let clock = TestClock()
        let cache = CacheMiddleware(now: clock.read)
        let chain = try await Self.chain(cache)
        let key = uniqueKey()
        let request = try cacheRequest(key, ["max_age": "10"])
        let strict = try cacheRequest(uniqueKey(), ["max_age": "10", "must_revalidate": "1"])
        let noCache = try cacheRequest(uniqueKey(), ["no_cache": "1"])
        for each in [request, strict, noCache] { _ = try await chain.load(each) }
        clock.advance(3600)
        func offline(_ request: APIRequest) -> APIRequest {
            var request = request
            request[option: CacheOffline.self] = true
            return request
        }
        let old = try await chain.load(offline(request))
        #expect(old.status == .ok && ageIsAbout(old, 3600))
        #expect(try await chain.load(offline(strict)).status == .gatewayTimeout)
        #expect(try await chain.load(offline(noCache)).status == .gatewayTimeout)
        #expect(try await chain.load(offline(try cacheRequest(uniqueKey()))).status == .gatewayTimeout)
        #expect(cache.statistics.stale == 1 && cache.statistics.unavailable == 3)
        #expect(try await cacheStats(key) == CacheStats(full: 1, notModified: 0))
    }

    @Test("5861 §3: stale-while-revalidate answers at once and refreshes once in the background; past the window, the origin first")
    func staleWhileRevalidate() async throws {
        let clock = TestClock()
        let cache = CacheMiddleware(now: clock.read)
        let chain = try await Self.chain(cache)
        let key = uniqueKey()
        // Fresh for 10 s: the refresh's 304 (its Date in whole seconds) makes it fresh again.
        let request = try cacheRequest(key, ["max_age": "10", "swr": "60"])
        let events = Locked<[CallEvent.CacheOutcome]>([])
        let observed = { (request: APIRequest) in
            var observed = request
            observed.observe(CallObserver { event in if case .cache(let outcome) = event { events.withLock { $0.append(outcome) } } })
            return observed
        }(request)
        _ = try await chain.load(observed)
        clock.advance(15)
        try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
            for _ in 0..<3 { group.addTask { try await chain.load(observed).status } }
            for try await status in group { #expect(status == .ok) }
        }
        // The refresh's 304 may come before the last of the three: then it is a hit.
        let seen = events.withLock { $0 }
        #expect(seen.first == .miss && seen.count == 4 && seen.dropFirst().allSatisfy { $0 == .stale || $0 == .hit }, "\(seen)")
        #expect(seen.contains(.stale), "\(seen)")
        // One refresh for the three, a 304 that makes the entry fresh again.
        #expect(await Timing.eventually { (try? await cacheStats(key)) == CacheStats(full: 1, notModified: 1) })
        #expect(
            await Timing.eventually {
                _ = try? await chain.load(request)
                return cache.statistics.hits >= 1
            })
        #expect(try await cacheStats(key) == CacheStats(full: 1, notModified: 1))

        clock.advance(100)  // past the window: revalidated before answering
        _ = try await chain.load(request)
        #expect(cache.statistics.revalidated == 1)
    }

    @Test("5861 §3: a reset cancels the background refresh and waits for it: nothing is stored after")
    func resetCancelsRefresh() async throws {
        let clock = TestClock()
        let cache = CacheMiddleware(now: clock.read)
        // An origin whose refresh answers 0.5 s later whatever a cancel says: the reset
        // must wait for it, or its answer lands in the emptied cache.
        let origin = StubbornLoader()
        let chain = cache --> origin
        let request = try APIRequest(.get, urlString: "http://127.0.0.1:9/refreshed")
        _ = try await chain.load(request)
        clock.advance(15)
        origin.delay.withLock { $0 = Timing.stretch(0.5) }
        let started = ContinuousClock.now
        let stale = try await chain.load(request)  // stale, and a refresh starts
        #expect(ContinuousClock.now - started < Timing.stretch(.milliseconds(400)), "the stale answer did not wait for the refresh")
        #expect(String(decoding: stale.body, as: UTF8.self) == "1")
        #expect(await Timing.eventually { origin.calls.withLock { $0 } == 2 }, "the refresh started")
        await cache.reset()
        #expect(origin.answered.withLock { $0 } == 2, "the reset waited for the refresh to end")
        #expect(cache.usage.entries == 0)
        #expect(cache.statistics.stored == 1, "the refresh's answer was not stored after the reset")
    }

    @Test("5861 §4: stale-if-error answers when the origin fails with 503 or does not answer; past the window, the failure", arguments: TransportKind.allCases)
    func staleIfError(kind: TransportKind) async throws {
        let clock = TestClock()
        let cache = CacheMiddleware(now: clock.read)
        let chain = try await Self.chain(cache, kind)
        let key = uniqueKey()
        let request = try cacheRequest(key, ["max_age": "1", "sie": "60"])
        let first = try await chain.load(request)
        try await Self.setFailing(key, true)
        clock.advance(5)
        let rescued = try await chain.load(request)
        #expect(rescued.status == .ok && rescued.body == first.body)
        #expect(cache.statistics.staleIfError == 1)
        clock.advance(100)
        let failed = try await chain.load(request)
        #expect(failed.status == .serviceUnavailable)
        try await Self.setFailing(key, false)

        // No answer at all: a transport that cannot connect.
        let unreachable = EnvironmentMiddleware(try await TestServer.environment()) --> cache --> FailingLoader()
        let noOrigin = try cacheRequest(uniqueKey(), ["max_age": "1", "sie": "60"])
        _ = try await chain.load(noOrigin)
        clock.advance(5)
        let fromCache = try await unreachable.load(noOrigin)
        #expect(fromCache.status == .ok && cache.statistics.staleIfError == 2)
        clock.advance(100)
        await #expect(throws: CatenaError.self) { try await unreachable.load(noOrigin) }

        // Not the origin's failure: a request refused before it left, a 404.
        let refusing = EnvironmentMiddleware(try await TestServer.environment()) --> cache --> FailingLoader(code: .invalidRequest)
        let mine = try cacheRequest(uniqueKey(), ["max_age": "1", "sie": "60"])
        _ = try await chain.load(mine)
        clock.advance(5)
        let refused = await #expect(throws: CatenaError.self) { try await refusing.load(mine) }
        #expect(refused?.code == .invalidRequest)
        let gone = EnvironmentMiddleware(try await TestServer.environment()) --> cache --> NotFoundLoader()
        #expect(try await gone.load(mine).status == .notFound)
        #expect(cache.statistics.staleIfError == 2)
    }

    @Test("9111 §4.4: a write drops its Location's and Content-Location's entries on its origin, not another's", arguments: TransportKind.allCases)
    func invalidation(kind: TransportKind) async throws {
        let cache = CacheMiddleware()
        let chain = try await Self.chain(cache, kind)
        let (a, b, c) = (uniqueKey(), uniqueKey(), uniqueKey())
        for key in [a, b] { _ = try await chain.load(try cacheRequest(key, ["max_age": "60"])) }
        // The same server under another name is another origin: its entry stays.
        let port = try #require(try await TestServer.running().baseURL.port)
        let elsewhere = try APIRequest(.get, urlString: "http://localhost:\(port)/api/cache/\(c)?max_age=60")
        _ = try await chain.load(elsewhere)
        let write = try APIRequest(
            .post, path: ["api", "cache-write"],
            query: [
                URLQueryItem(name: "location", value: "/api/cache/\(a)?max_age=60"),
                URLQueryItem(name: "content_location", value: "http://localhost:\(port)/api/cache/\(c)?max_age=60"),
            ])
        #expect(try await chain.load(write).status == .created)
        for key in [a, b] { _ = try await chain.load(try cacheRequest(key, ["max_age": "60"])) }
        _ = try await chain.load(elsewhere)
        #expect(try await cacheStats(a) == CacheStats(full: 2, notModified: 0), "the Location's entry went")
        #expect(try await cacheStats(b) == CacheStats(full: 1, notModified: 0))
        #expect(try await cacheStats(c) == CacheStats(full: 1, notModified: 0), "another origin's name drops nothing")
    }
}

/// Answers each call as its closure says.
private struct ScriptedOrigin: HTTPLoader {
    let answer: @Sendable (APIRequest) -> APIResponse
    func load(_ request: APIRequest) async throws(CatenaError) -> APIResponse { answer(request) }
}

/// Never reaches a server: every call fails, by default as a refused connection would.
private struct FailingLoader: HTTPLoader {
    var code = CatenaError.Code.cannotConnect
    func load(_ request: APIRequest) async throws(CatenaError) -> APIResponse {
        throw CatenaError(code, request: request)
    }
}

/// Every call answers 404.
private struct NotFoundLoader: HTTPLoader {
    func load(_ request: APIRequest) async throws(CatenaError) -> APIResponse {
        APIResponse(status: .notFound, headerFields: [:], body: Data(), request: request)
    }
}

/// Answers `max-age=10, stale-while-revalidate=60`, numbered, after `delay` seconds that
/// no cancel cuts short.
private final class StubbornLoader: HTTPLoader {
    let delay = Locked<Double>(0)
    let calls = Locked(0)
    let answered = Locked(0)

    func load(_ request: APIRequest) async throws(CatenaError) -> APIResponse {
        let number = calls.withLock { calls in
            calls += 1
            return calls
        }
        let wait = delay.withLock { $0 }
        if wait > 0 {
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                DispatchQueue.global().asyncAfter(deadline: .now() + wait) { done.resume() }
            }
        }
        answered.withLock { $0 += 1 }
        return APIResponse(
            status: .ok, headerFields: [.cacheControl: "max-age=10, stale-while-revalidate=60"], body: Data(String(number).utf8), request: request)
    }
}

/// An origin whose clock runs `behind` seconds late: `max-age=60` answers dated then.
private final class DatedLoader: HTTPLoader {
    let behind: TimeInterval
    let calls = Locked(0)

    init(behind: TimeInterval) { self.behind = behind }

    func load(_ request: APIRequest) async throws(CatenaError) -> APIResponse {
        calls.withLock { $0 += 1 }
        return APIResponse(
            status: .ok, headerFields: [.cacheControl: "max-age=60", .date: HTTPDate.format(Date().addingTimeInterval(-behind))],
            body: Data("dated".utf8), request: request)
    }
}
