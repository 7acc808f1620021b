import Catena
import Foundation
import HTTPTypes
import ReqresAPI
import Testing
@testable import CatenaTestSupport

/// What `/api/cache-stats/{key}` reports: full answers and 304s for a key.
struct CacheStats: Decodable, Equatable {
    let full: Int
    let notModified: Int
}

func cacheStats(_ key: String) async throws -> CacheStats {
    try await TransportKind.asyncHTTPClient.chain().load(try APIRequest(.get, path: ["api", "cache-stats", key])).decode(CacheStats.self)
}

/// `/api/cache/{key}` with the given directives.
func cacheRequest(_ key: String, _ query: [String: String] = [:], headers: HTTPFields = [:]) throws -> APIRequest {
    var request = try APIRequest(
        .get, path: ["api", "cache", key], query: query.sorted { $0.key < $1.key }.map { URLQueryItem(name: $0.key, value: $0.value) })
    for field in headers { request.headerFields.append(field) }
    return request
}

/// Whether `response`'s `Age` is `seconds`, or one more: the server's `Date` has whole
/// seconds, so an answer arrives up to a second (more on a loaded machine) after it.
func ageIsAbout(_ response: APIResponse, _ seconds: Int) -> Bool {
    Int(response.headerFields[.age] ?? "").map { (seconds...seconds + Int(2 * Timing.factor)).contains($0) } ?? false
}

/// A clock the test moves, from the last whole second: the server's `Date` (whole seconds,
/// taken later) is then never behind it, and adds nothing to an answer's age.
final class TestClock: Sendable {
    private let now = Locked(Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down)))
    func read() -> Date { now.withLock { $0 } }
    func advance(_ seconds: TimeInterval) { now.withLock { $0 += seconds } }
}

@Suite("CacheMiddleware against the demo server")
struct CacheMiddlewareTests {
    func chain(_ cache: CacheMiddleware, _ kind: TransportKind = .asyncHTTPClient) async throws -> any HTTPLoader {
        EnvironmentMiddleware(try await TestServer.environment()) --> cache --> kind.make()
    }

    @Test("within max-age the cache answers without asking the server", arguments: TransportKind.allCases)
    func hitWithinMaxAge(kind: TransportKind) async throws {
        let clock = TestClock()
        let cache = CacheMiddleware(now: clock.read)
        let loader = try await chain(cache, kind)
        let key = uniqueKey()
        let request = try cacheRequest(key, ["max_age": "60", "etag": "0", "last_modified": "0"])
        let first = try await loader.load(request)
        clock.advance(30)
        let second = try await loader.load(request)
        #expect(second.status == .ok && second.body == first.body)
        #expect(ageIsAbout(second, 30))
        #expect(try await cacheStats(key) == CacheStats(full: 1, notModified: 0))
        #expect(cache.statistics.hits == 1)

        clock.advance(31)  // stale now, and no validator: fetched anew
        _ = try await loader.load(request)
        #expect(try await cacheStats(key) == CacheStats(full: 2, notModified: 0))
    }

    @Test("Expires gives freshness when there is no max-age; an invalid Expires means already expired")
    func expires() async throws {
        let cache = CacheMiddleware()
        let loader = try await chain(cache)
        let fresh = uniqueKey()
        for _ in 0..<2 { _ = try await loader.load(try cacheRequest(fresh, ["expires": "3600", "etag": "0", "last_modified": "0"])) }
        #expect(try await cacheStats(fresh) == CacheStats(full: 1, notModified: 0))
        let expired = uniqueKey()
        for _ in 0..<2 { _ = try await loader.load(try cacheRequest(expired, ["expires": "never", "last_modified": "0"])) }
        #expect(try await cacheStats(expired) == CacheStats(full: 1, notModified: 1), "stored for its ETag, but revalidated")
    }

    @Test("a stale entry is revalidated with If-None-Match and a 304 serves it", arguments: TransportKind.allCases)
    func revalidateETag(kind: TransportKind) async throws {
        let clock = TestClock()
        let cache = CacheMiddleware(now: clock.read)
        let loader = try await chain(cache, kind)
        let key = uniqueKey()
        let request = try cacheRequest(key, ["max_age": "10", "last_modified": "0"])
        let first = try await loader.load(request)
        #expect(first.headerFields[.eTag] != nil)
        clock.advance(11)
        let second = try await loader.load(request)
        #expect(second.status == .ok && second.body == first.body, "the 304 turned into the cached response")
        #expect(try await cacheStats(key) == CacheStats(full: 1, notModified: 1))
        #expect(cache.statistics.revalidated == 1)
        clock.advance(5)  // the 304 made it fresh again
        _ = try await loader.load(request)
        #expect(try await cacheStats(key) == CacheStats(full: 1, notModified: 1))
    }

    @Test("a ValidationMiddleware below the cache does not turn the revalidation's 304 into an error", arguments: TransportKind.allCases)
    func validateBelowCache(kind: TransportKind) async throws {
        let clock = TestClock()
        let cache = CacheMiddleware(now: clock.read)
        let loader = EnvironmentMiddleware(try await TestServer.environment()) --> cache --> ValidationMiddleware() --> kind.make()
        let key = uniqueKey()
        let request = try cacheRequest(key, ["max_age": "10", "last_modified": "0"])
        let first = try await loader.load(request)
        clock.advance(11)
        let second = try await loader.load(request)
        #expect(second.status == .ok && second.body == first.body)
        #expect(try await cacheStats(key) == CacheStats(full: 1, notModified: 1))
        #expect(cache.statistics.revalidated == 1)
    }

    @Test("revalidation with Last-Modified / If-Modified-Since when there is no ETag")
    func revalidateLastModified() async throws {
        let cache = CacheMiddleware()
        let loader = try await chain(cache)
        let key = uniqueKey()
        let request = try cacheRequest(key, ["no_cache": "1", "etag": "0"])
        let first = try await loader.load(request)
        #expect(first.headerFields[.eTag] == nil && first.headerFields[.lastModified] != nil)
        let second = try await loader.load(request)
        #expect(second.body == first.body)
        #expect(try await cacheStats(key) == CacheStats(full: 1, notModified: 1), "no-cache: stored, but asked about every time")
    }

    @Test("no-store is not stored; neither is a response to a credentialed request unless it is public")
    func notStored() async throws {
        let cache = CacheMiddleware()
        let loader = try await chain(cache)
        let key = uniqueKey()
        for _ in 0..<2 { _ = try await loader.load(try cacheRequest(key, ["max_age": "60", "no_store": "1"])) }
        #expect(try await cacheStats(key) == CacheStats(full: 2, notModified: 0))

        let secret = uniqueKey()
        let credentialed: HTTPFields = [.authorization: "Bearer secret-token"]
        for _ in 0..<2 { _ = try await loader.load(try cacheRequest(secret, ["max_age": "60"], headers: credentialed)) }
        #expect(try await cacheStats(secret) == CacheStats(full: 2, notModified: 0), "a credentialed answer is not kept")

        let shared = uniqueKey()
        for _ in 0..<2 { _ = try await loader.load(try cacheRequest(shared, ["max_age": "60", "public": "1"], headers: credentialed)) }
        #expect(try await cacheStats(shared) == CacheStats(full: 1, notModified: 0), "unless it says public")
        #expect(cache.usage.entries == 1)
    }

    @Test("a GET the cache sends on without looking (the request's no-store, a download) reports a miss, once")
    func passedOnIsAMiss() async throws {
        let cache = CacheMiddleware()
        let loader = try await chain(cache)
        let outcomes = Locked<[CallEvent.CacheOutcome]>([])
        let observer = CallObserver { event in if case .cache(let outcome) = event { outcomes.withLock { $0.append(outcome) } } }
        var unstored = try cacheRequest(uniqueKey(), ["max_age": "60"], headers: [.cacheControl: "no-store"])
        unstored.observe(observer)
        _ = try await loader.load(unstored)
        let directory = FileManager.default.temporaryDirectory.appending(path: "catena-download-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var download = try cacheRequest(uniqueKey(), ["max_age": "60"])
        download[option: DownloadDestination.self] = DownloadDestination(file: directory.appending(path: "body"))
        download.observe(observer)
        _ = try await loader.load(download)
        #expect(outcomes.withLock { $0 } == [.miss, .miss])
        #expect(cache.statistics.misses == 2 && cache.usage.entries == 0)
    }

    @Test("the size bound evicts the least recently used entries")
    func evicts() async throws {
        let cache = CacheMiddleware(maximumBytes: 3_000)
        let loader = try await chain(cache)
        let keys = (0..<4).map { uniqueKey("evict\($0)") }
        for key in keys { _ = try await loader.load(try cacheRequest(key, ["max_age": "60", "size": "800"])) }
        #expect(cache.statistics.evicted >= 1)
        #expect(cache.usage.bytes <= 3_000)
        // The oldest went; the newest is still there.
        _ = try await loader.load(try cacheRequest(keys[3], ["max_age": "60", "size": "800"]))
        _ = try await loader.load(try cacheRequest(keys[0], ["max_age": "60", "size": "800"]))
        #expect(try await cacheStats(keys[3]) == CacheStats(full: 1, notModified: 0))
        #expect(try await cacheStats(keys[0]) == CacheStats(full: 2, notModified: 0))

        let tiny = CacheMiddleware(maximumBytes: 100)
        let tinyLoader = try await chain(tiny)
        _ = try await tinyLoader.load(try cacheRequest(uniqueKey(), ["max_age": "60", "size": "800"]))
        #expect(tiny.usage.entries == 0, "a response larger than the bound is not stored")
    }

    @Test("Vary: a different value of the named header is a miss")
    func vary() async throws {
        let cache = CacheMiddleware()
        let loader = try await chain(cache)
        let key = uniqueKey()
        let english = try cacheRequest(key, ["max_age": "60", "vary": "Accept-Language"], headers: [.acceptLanguage: "en"])
        let german = try cacheRequest(key, ["max_age": "60", "vary": "Accept-Language"], headers: [.acceptLanguage: "de"])
        _ = try await loader.load(english)
        _ = try await loader.load(english)
        _ = try await loader.load(german)
        #expect(try await cacheStats(key) == CacheStats(full: 2, notModified: 0))
    }

    @Test("a request's own no-cache revalidates; a write drops the entry")
    func requestDirectivesAndWrites() async throws {
        let cache = CacheMiddleware()
        let loader = try await chain(cache)
        let users = try APIRequest(.get, path: ["api", "users", "2"])
        _ = try await loader.load(users)
        var revalidate = users
        revalidate.headerFields[.cacheControl] = "no-cache"
        _ = try await loader.load(revalidate)
        #expect(cache.statistics.revalidated == 1)
        #expect(cache.usage.entries == 1)
        var update = try APIRequest(.put, path: ["api", "users", "2"])
        update.body = .json(["job": "zion resident"])
        _ = try await loader.load(update)
        #expect(cache.usage.entries == 0, "a successful PUT drops the cached GET of its URL")
    }
}

@Suite("Content loader against the demo server")
@MainActor
struct ContentLoaderIntegrationTests {
    @Test("pages through reqres users to the last page, then a refresh is served by revalidation")
    func pagingWithCache() async throws {
        let cache = CacheMiddleware()
        let client = Client(EnvironmentMiddleware(try await TestServer.environment()) --> cache --> AsyncHTTPClientTransportForTests.make())
        let loader = ContentLoader(client: client, pages: { ListUsersEndpoint(page: $0, perPage: 5) })
        var pagesSeen: [Int] = []
        let token = loader.observe { state in
            if case .success(let pages) = state { pagesSeen.append(pages.loadedPages) }
        }
        while loader.startLoading() {
            await idle(loader)
        }
        #expect(pagesSeen == [1, 2, 3])
        #expect(loader.state.content?.items.map { $0.id } == Array(1...12))
        #expect(loader.state.content?.hasNextPage == false)
        #expect(loader.refresh())
        await idle(loader)
        #expect(loader.state.content?.items.count == 5)
        #expect(cache.statistics.revalidated == 1, "the users list says no-cache: the refresh asked, and got a 304")
        _ = token
    }
}

/// Waits until `loader` is not loading, following its states.
@MainActor
func idle<Content>(_ loader: ContentLoader<Content>) async {
    for await state in loader.states where !state.isLoading { return }
}

enum AsyncHTTPClientTransportForTests {
    static func make() -> any HTTPLoader { TransportKind.asyncHTTPClient.make() }
}
