import Catena
import Foundation
import HTTPTypes
import Testing
@testable import CatenaTestSupport

/// The cache against httpbin, a server the project did not write: its `/cache/{n}`,
/// `/etag/{tag}`, `/cache` and `/response-headers` routes, on both transports.
@Suite("CacheMiddleware against httpbin", .enabled(if: HttpbinProcess.testsRun), .serialized)
struct HttpbinCacheTests {
    static func chain(_ cache: CacheMiddleware, _ kind: TransportKind, _ server: HttpbinProcess) throws -> any HTTPLoader {
        let environment = try #require(ServerEnvironment(baseURL: server.baseURL))
        return EnvironmentMiddleware(environment) --> cache --> kind.make()
    }

    /// `/response-headers` answering with `fields` (and a `kind` to keep transports apart).
    static func answering(_ fields: KeyValuePairs<String, String>, _ kind: TransportKind) throws -> APIRequest {
        try APIRequest(
            .get, path: ["response-headers"], query: [URLQueryItem(name: "kind", value: "\(kind)")] + fields.map { URLQueryItem(name: $0.key, value: $0.value) }
        )
    }

    @Test("/cache/60's max-age answers the next call; in the next run too, from disk", arguments: TransportKind.allCases)
    func maxAge(kind: TransportKind) async throws {
        let server = try await HttpbinProcess.start()
        defer { server.stop() }
        let directory = FileManager.default.temporaryDirectory.appending(path: "catena-httpbin-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let cache = CacheMiddleware(directory: directory)
        let request = try APIRequest(.get, path: ["cache", "60"], query: [URLQueryItem(name: "kind", value: "\(kind)")])
        let first = try await Self.chain(cache, kind, server).load(request)
        #expect(first.status == .ok && first.headerFields[.cacheControl] == "public, max-age=60")
        let next = CacheMiddleware(directory: directory)
        let again = try await Self.chain(next, kind, server).load(request)
        #expect(again.body == first.body && next.statistics.hits == 1)
        // The request's no-cache: httpbin's /cache/{n} has no validator, so a new answer.
        _ = try await Self.chain(next, kind, server).load(CacheRulesTests.asking(request, "no-cache"))
        #expect(next.statistics.misses == 1)
    }

    @Test("/etag/{tag} and /cache: a stored answer's ETag or Last-Modified gets httpbin's 304", arguments: TransportKind.allCases)
    func revalidation(kind: TransportKind) async throws {
        let server = try await HttpbinProcess.start()
        defer { server.stop() }
        let clock = TestClock()
        let cache = CacheMiddleware(now: clock.read)
        let chain = try Self.chain(cache, kind, server)
        let tagged = try APIRequest(.get, path: ["etag", "catena-\(kind)"])
        let first = try await chain.load(tagged)
        let again = try await chain.load(tagged)
        #expect(again.body == first.body && cache.statistics.revalidated == 1, "no lifetime: asked with If-None-Match")
        // /cache: a new ETag each time, Last-Modified now; 304 to any condition.
        let cached = try APIRequest(.get, path: ["cache"], query: [URLQueryItem(name: "kind", value: "\(kind)")])
        let full = try await chain.load(cached)
        #expect(full.headerFields[.eTag] != nil && full.headerFields[.lastModified] != nil)
        clock.advance(2)  // past the heuristic's tenth of at most a second unchanged
        let confirmed = try await chain.load(cached)
        #expect(confirmed.status == .ok && confirmed.body == full.body && cache.statistics.revalidated == 2)
    }

    @Test("Vary, no-store and the heuristic from Last-Modified, as httpbin's /response-headers sets them", arguments: TransportKind.allCases)
    func responseHeaders(kind: TransportKind) async throws {
        let server = try await HttpbinProcess.start()
        defer { server.stop() }
        let cache = CacheMiddleware()
        let chain = try Self.chain(cache, kind, server)
        let varying = try Self.answering(["Cache-Control": "max-age=60", "Vary": "Accept-Language"], kind)
        let language = { (value: String) in
            var request = varying
            request.headerFields[.acceptLanguage] = value
            return request
        }
        _ = try await chain.load(language("en, de;q=0.5"))
        _ = try await chain.load(language("EN,de; q=0.5"))
        #expect(cache.statistics.hits == 1, "the same value, normalised (9111 §4.1)")
        _ = try await chain.load(language("de"))
        #expect(cache.statistics.hits == 1 && cache.statistics.misses == 2, "another value")

        let unstored = try Self.answering(["Cache-Control": "max-age=60, no-store"], kind)
        _ = try await chain.load(unstored)
        _ = try await chain.load(unstored)
        #expect(cache.statistics.misses == 4 && cache.statistics.hits == 1, "no-store: never kept")

        // Unchanged for ten days, with no lifetime: fresh for a day (9111 §4.2.2).
        let old = try Self.answering(["Last-Modified": HTTPDate.format(Date() - 10 * 86_400)], kind)
        _ = try await chain.load(old)
        _ = try await chain.load(old)
        #expect(cache.statistics.hits == 2)
    }

    @Test("stale-while-revalidate from httpbin: the stale answer at once, httpbin's new one stored behind it", arguments: TransportKind.allCases)
    func staleWhileRevalidate(kind: TransportKind) async throws {
        let server = try await HttpbinProcess.start()
        defer { server.stop() }
        let clock = TestClock()
        let cache = CacheMiddleware(now: clock.read)
        let chain = try Self.chain(cache, kind, server)
        let request = try Self.answering(["Cache-Control": "max-age=60, stale-while-revalidate=60"], kind)
        _ = try await chain.load(request)
        clock.advance(70)
        let stale = try await chain.load(request)
        #expect(stale.status == .ok && cache.statistics.stale == 1)
        #expect(await Timing.eventually(within: .seconds(20)) { cache.statistics.stored == 2 }, "the refresh stored httpbin's answer")
        _ = try await chain.load(request)
        #expect(cache.statistics.hits == 1, "fresh again after the refresh")
        await cache.reset()
    }
}
