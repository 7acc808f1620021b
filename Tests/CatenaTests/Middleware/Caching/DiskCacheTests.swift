@testable import Catena
import Foundation
import HTTPTypes
import Testing
@testable import CatenaTestSupport

/// `CacheMiddleware(directory:)`: entries as files that outlive the process. A second
/// middleware on the same directory stands for the next run of a program.
@Suite("CacheMiddleware on disk")
struct DiskCacheTests {
    /// A fresh directory, removed by the caller.
    static func directory() -> URL {
        FileManager.default.temporaryDirectory.appending(path: "catena-cache-\(UUID().uuidString)/cache", directoryHint: .isDirectory)
    }

    static func chain(_ cache: CacheMiddleware, _ kind: TransportKind = .asyncHTTPClient) async throws -> any HTTPLoader {
        EnvironmentMiddleware(try await TestServer.environment()) --> cache --> kind.make()
    }

    static func entries(_ directory: URL) throws -> [URL] {
        try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil).filter { $0.lastPathComponent.hasSuffix(".entry") }
    }

    static func mode(_ url: URL) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: url.path)[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }

    @Test("an entry one cache stored answers the next on the same directory, without the network", arguments: TransportKind.allCases)
    func outlivesTheProcess(kind: TransportKind) async throws {
        let directory = Self.directory()
        defer { try? FileManager.default.removeItem(at: directory.deletingLastPathComponent()) }
        let clock = TestClock()
        let key = uniqueKey()
        let request = try cacheRequest(key, ["max_age": "60"])
        let first = try await Self.chain(CacheMiddleware(directory: directory, now: clock.read), kind).load(request)
        #expect(try Self.entries(directory).count == 1)

        clock.advance(20)
        let next = CacheMiddleware(directory: directory, now: clock.read)
        #expect(next.usage.entries == 1, "the index is rebuilt from the files")
        let again = try await Self.chain(next, kind).load(request)
        #expect(again.body == first.body && again.status == .ok)
        #expect(ageIsAbout(again, 20))
        #expect(again.headerFields[.eTag] == first.headerFields[.eTag])
        #expect(next.statistics.hits == 1)
        #expect(try await cacheStats(key) == CacheStats(full: 1, notModified: 0))

        // Stale in the next run: revalidated, and the 304's refresh written back.
        clock.advance(60)
        let third = CacheMiddleware(directory: directory, now: clock.read)
        _ = try await Self.chain(third, kind).load(request)
        #expect(third.statistics.revalidated == 1)
        #expect(try await cacheStats(key) == CacheStats(full: 1, notModified: 1))
    }

    @Test("files are 0600 in a 0700 directory, named and filled without the URL's key or the credential")
    func private_() async throws {
        let directory = Self.directory()
        defer { try? FileManager.default.removeItem(at: directory.deletingLastPathComponent()) }
        let key = uniqueKey()
        let token = "secret-token-\(UUID().uuidString)"
        let cache = CacheMiddleware(directory: directory)
        let chain = try await Self.chain(cache)
        var request = try cacheRequest(key, ["max_age": "60", "public": "1"])
        request.headerFields[.authorization] = "Bearer \(token)"
        _ = try await chain.load(request)
        let files = try Self.entries(directory)
        #expect(files.count == 1)
        #expect(try Self.mode(directory) == 0o700)
        for file in try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil) {
            #expect(try Self.mode(file) == 0o600, "\(file.lastPathComponent)")
            let contents = try Data(contentsOf: file)
            #expect(contents.range(of: Data(token.utf8)) == nil, "no credential in \(file.lastPathComponent)")
            #expect(!file.lastPathComponent.contains(key))
        }

        // Another identity: its own file, and the first one's entry never answers it.
        var other = request
        other.headerFields[.authorization] = "Bearer another-\(token)"
        _ = try await chain.load(other)
        #expect(try Self.entries(directory).count == 2)
        #expect(try await cacheStats(key) == CacheStats(full: 2, notModified: 0))
        let fresh = try await Self.chain(CacheMiddleware(directory: directory)).load(other)
        #expect(fresh.headerFields[.age] != nil, "the second identity's own entry answers it in the next run")
        #expect(try await cacheStats(key) == CacheStats(full: 2, notModified: 0))
    }

    @Test("a truncated, corrupted, emptied or foreign file is a miss: the answer comes from the network and the file is replaced")
    func damagedFiles() async throws {
        let damages: [(String, (Data) -> Data)] = [
            ("truncated", { $0.prefix($0.count / 2) }),
            (
                "a body byte changed",
                { data in
                    var copy = data; copy[copy.count - 3] ^= 0x20; return copy
                }
            ),
            ("emptied", { _ in Data() }),
            ("foreign", { _ in Data("not a cache entry at all\n".utf8) }),
            (
                "a bit of the description changed",
                { data in
                    var copy = data; copy[40] ^= 0x01; return copy
                }
            ),
        ]
        for (damage, change) in damages {
            let directory = Self.directory()
            defer { try? FileManager.default.removeItem(at: directory.deletingLastPathComponent()) }
            let key = uniqueKey()
            let request = try cacheRequest(key, ["max_age": "60"])
            let first = try await Self.chain(CacheMiddleware(directory: directory)).load(request)
            let file = try #require(try Self.entries(directory).first)
            try change(try Data(contentsOf: file)).write(to: file)

            let next = CacheMiddleware(directory: directory)
            let answer = try await Self.chain(next).load(request)
            #expect(answer.status == .ok && answer.body == first.body, "\(damage)")
            #expect(next.statistics.misses == 1 && next.statistics.hits == 0, "\(damage)")
            #expect(try await cacheStats(key) == CacheStats(full: 2, notModified: 0), "\(damage)")
            // Replaced: the run after answers from it again.
            let third = CacheMiddleware(directory: directory)
            _ = try await Self.chain(third).load(request)
            #expect(third.statistics.hits == 1, "\(damage)")
        }
    }

    @Test("the byte bound holds on disk and across runs, least recently used out")
    func bound() async throws {
        let directory = Self.directory()
        defer { try? FileManager.default.removeItem(at: directory.deletingLastPathComponent()) }
        let cache = CacheMiddleware(maximumBytes: 10_000, directory: directory)
        let chain = try await Self.chain(cache)
        let keys = (0..<4).map { _ in uniqueKey() }
        for key in keys { _ = try await chain.load(try cacheRequest(key, ["max_age": "60", "size": "3000"])) }
        let bytes = try Self.entries(directory).reduce(0) {
            $0 + ((try FileManager.default.attributesOfItem(atPath: $1.path)[.size] as? NSNumber)?.intValue ?? 0)
        }
        #expect(bytes <= 10_000 && bytes > 0)
        #expect(cache.usage.bytes == bytes)
        #expect(cache.statistics.evicted >= 1)
        // The first went first; the last is still there, for the next run too.
        let next = CacheMiddleware(maximumBytes: 10_000, directory: directory)
        _ = try await Self.chain(next).load(try cacheRequest(keys[3], ["max_age": "60", "size": "3000"]))
        #expect(next.statistics.hits == 1)
        _ = try await Self.chain(next).load(try cacheRequest(keys[0], ["max_age": "60", "size": "3000"]))
        #expect(next.statistics.misses == 1)
        // A smaller bound in a later run trims the directory when it is first used.
        let smaller = CacheMiddleware(maximumBytes: 4_000, directory: directory)
        #expect(smaller.usage.bytes <= 4_000)
        #expect(try Self.entries(directory).count == smaller.usage.entries)
    }

    @Test("a directory that cannot be made costs misses, never a failed call")
    func unusableDirectory() async throws {
        let parent = Self.directory().deletingLastPathComponent()
        try FileManager.default.createDirectory(at: parent, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: parent) }
        // A regular file where the directory should be.
        let file = parent.appending(path: "cache")
        try Data("in the way".utf8).write(to: file)
        let cache = CacheMiddleware(directory: file)
        let chain = try await Self.chain(cache)
        let key = uniqueKey()
        for _ in 0..<2 {
            let answer = try await chain.load(try cacheRequest(key, ["max_age": "60"]))
            #expect(answer.status == .ok)
        }
        #expect(cache.statistics.misses == 2 && cache.statistics.stored == 0)
        #expect(cache.usage.entries == 0)
        #expect(try await cacheStats(key) == CacheStats(full: 2, notModified: 0))
    }

    @Test("a write drops the URL's entries on disk for every identity, and a reset empties the directory")
    func invalidation() async throws {
        let directory = Self.directory()
        defer { try? FileManager.default.removeItem(at: directory.deletingLastPathComponent()) }
        let counters = CacheCounters()
        let store = DiskCacheStore(directory: directory, maximumBytes: 1 << 20, counters: counters)
        let url = "http://127.0.0.1:1/api/thing"
        let anyone = APIRequest(.get, url: try #require(URL(string: url)))
        var someone = anyone
        someone.headerFields[.authorization] = "Bearer t"
        let response = APIResponse(
            status: .ok, headerFields: [.cacheControl: "max-age=60, public", .eTag: "\"1\""], body: Data("{}".utf8), request: anyone)
        let entry = try #require(CacheEntry(response: response, request: anyone, receivedAt: Date()))
        store.put(entry, for: url, request: anyone, limit: 1 << 20)
        store.put(entry, for: url, request: someone, limit: 1 << 20)
        store.put(entry, for: url + "/other", request: anyone, limit: 1 << 20)
        #expect(try Self.entries(directory).count == 3)
        #expect(store.entry(for: url, matching: someone) != nil)

        store.removeAll(forAddress: url)
        #expect(store.entry(for: url, matching: anyone) == nil && store.entry(for: url, matching: someone) == nil)
        #expect(store.entry(for: url + "/other", matching: anyone) != nil)
        #expect(try Self.entries(directory).count == 1)
        store.removeAll()
        #expect(try Self.entries(directory).isEmpty)
        #expect(store.usage.entries == 0 && store.usage.bytes == 0)
    }

    @Test("random damage to an archived entry: it decodes as it was written, or not at all")
    func archiveDamage() throws {
        var generator = SystemRandomNumberGenerator()
        let plain = APIRequest(.get, url: try #require(URL(string: "http://127.0.0.1:1/x")))
        for round in 0..<300 {
            // The value Vary names is kept sealed: here as Accept, in life often Authorization.
            var request = plain
            request.headerFields[.accept] = "accept-\(round)-value"
            let body = Data((0..<Int.random(in: 0..<300, using: &generator)).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
            let response = APIResponse(
                status: .ok, headerFields: [.cacheControl: "max-age=\(round)", .eTag: "\"\(round)\"", .vary: "Accept"], body: body, request: request)
            let entry = try #require(CacheEntry(response: response, request: request, receivedAt: Date(timeIntervalSince1970: Double(round))))
            let archived = try #require(entry.archived(key: "k", secret: [1]))
            let back = try #require(CacheEntry(archived: archived, key: "k", secret: [1]))
            #expect(back.body == entry.body && back.headerFields == entry.headerFields && back.receivedAt == entry.receivedAt)
            #expect(back.status == entry.status && back.matches(request) && !back.matches(plain))
            #expect(archived.range(of: Data("accept-\(round)-value".utf8)) == nil, "the Vary value is not in the file in clear")
            // Refreshed by a 304, a sealed entry stays sealed and still matches.
            let refreshed = back.refreshed(by: APIResponse(status: .notModified, headerFields: [:], body: Data(), request: request), at: Date())
            #expect(refreshed.matches(request) && !refreshed.matches(plain))
            let rearchived = try #require(refreshed.archived(key: "k", secret: [1]))
            #expect(try #require(CacheEntry(archived: rearchived, key: "k", secret: [1])).matches(request))
            #expect(CacheEntry(archived: archived, key: "another", secret: [1]) == nil, "another entry's file, renamed")

            var damaged = archived
            switch round % 3 {
            case 0: damaged = damaged.prefix(Int.random(in: 0..<damaged.count, using: &generator))
            case 1:
                let index = Int.random(in: 0..<damaged.count, using: &generator)
                damaged[index] ^= UInt8.random(in: 1 ... .max, using: &generator)
            default: damaged.append(UInt8.random(in: .min ... .max, using: &generator))
            }
            if let decoded = CacheEntry(archived: damaged, key: "k", secret: [1]) {
                #expect(decoded.body == entry.body && decoded.headerFields == entry.headerFields, "round \(round): damage decoded as something else")
            }
        }
    }

    @Test("against nginx: a file's entry from one run answers the next from its Last-Modified (9111 §4.2.2), then nginx's ETag revalidates it with 304")
    func nginx() async throws {
        let nginx = try await NginxProcess.start(locations: "")
        defer { nginx.stop() }
        // Unchanged for 1,000 s: fresh for 100 s by the heuristic.
        try nginx.write(Data("a static file nginx serves with an ETag and Last-Modified\n".utf8), at: "static.txt", modified: Date() - 1_000)
        let directory = Self.directory()
        defer { try? FileManager.default.removeItem(at: directory.deletingLastPathComponent()) }
        let environment = try #require(ServerEnvironment(baseURL: nginx.baseURL))
        for kind in TransportKind.allCases {
            let request = try APIRequest(.get, path: ["static.txt"], query: [.init(name: "kind", value: "\(kind)")])
            let first = try await (EnvironmentMiddleware(environment) --> CacheMiddleware(directory: directory) --> kind.make()).load(request)
            #expect(first.headerFields[.eTag] != nil && first.headerFields[.cacheControl] == nil && first.headerFields[.expires] == nil)
            let next = CacheMiddleware(directory: directory)
            let again = try await (EnvironmentMiddleware(environment) --> next --> kind.make()).load(request)
            #expect(again.body == first.body && next.statistics.hits == 1, "\(kind): fresh by the heuristic")
            // 200 s on: past a tenth of the time unchanged.
            let later = CacheMiddleware(directory: directory, now: { Date() + 200 })
            let third = try await (EnvironmentMiddleware(environment) --> later --> kind.make()).load(request)
            #expect(third.body == first.body)
            #expect(later.statistics.revalidated == 1, "\(kind)")
            #expect(nginx.arrivals.filter { $0.uri.contains("\(kind)") }.map(\.status) == [200, 304], "\(kind)")
        }
    }
}
