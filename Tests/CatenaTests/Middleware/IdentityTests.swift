import Catena
import CatenaDemoServer
import Foundation
import HTTPTypes
import Testing
@testable import CatenaTestSupport

/// Cached and de-duplicated answers never cross from one identity to another, and
/// downloads never go through either (issue 11, defect 3).
@Suite("Identities stay apart in the cache and in de-duplication")
struct IdentityTests {
    static let alice = BasicCredentials(user: "alice", password: "a-secret")
    static let bob = BasicCredentials(user: "bob", password: "b-secret")

    @Test("a cache above the auth loader never serves one caller's private answer to another", arguments: TransportKind.allCases)
    func cacheAboveAuth(kind: TransportKind) async throws {
        let key = "identity-above-\(kind)-\(UUID().uuidString)"
        let cache = CacheMiddleware()
        let chain =
            EnvironmentMiddleware(try await TestServer.environment()) --> cache
            --> BasicAuthMiddleware(hosts: [try await TestServer.authority()]) { $0[option: BasicCredentials.self] }
            --> kind.make()
        for who in [Self.alice, Self.bob] {
            var request = try cacheRequest(key, ["max_age": "3600"])
            request[option: BasicCredentials.self] = who
            #expect(try await chain.load(request).status == .ok)
        }
        #expect(try await cacheStats(key).full == 2, "bob's call reached the server instead of alice's stored answer")
        #expect(cache.usage.entries == 0, "an answer sent with credentials and without `public` is not stored")
    }

    @Test("a cache below the auth loader keeps a public answer per identity", arguments: TransportKind.allCases)
    func cacheBelowAuth(kind: TransportKind) async throws {
        let key = "identity-below-\(kind)-\(UUID().uuidString)"
        let cache = CacheMiddleware()
        let chain =
            EnvironmentMiddleware(try await TestServer.environment())
            --> BasicAuthMiddleware(hosts: [try await TestServer.authority()]) { $0[option: BasicCredentials.self] }
            --> cache --> kind.make()
        for who in [Self.alice, Self.bob, Self.alice, Self.bob] {
            var request = try cacheRequest(key, ["max_age": "3600", "public": "1"])
            request[option: BasicCredentials.self] = who
            #expect(try await chain.load(request).status == .ok)
        }
        #expect(try await cacheStats(key).full == 2, "one full answer per identity, then hits")
        #expect(cache.statistics.hits == 2)
    }

    @Test("callers that differ only by an API-key header get their own cache entries", arguments: TransportKind.allCases)
    func apiKeysKeptApart(kind: TransportKind) async throws {
        let key = "identity-apikey-\(kind)-\(UUID().uuidString)"
        let cache = CacheMiddleware()
        let chain = EnvironmentMiddleware(try await TestServer.environment()) --> cache --> kind.make()
        let apiKey = HTTPField.Name("X-Api-Key")!
        for caller in ["key-a", "key-b", "key-a", "key-b"] {
            var request = try cacheRequest(key, ["max_age": "3600"])
            request.headerFields[apiKey] = caller
            #expect(try await chain.load(request).status == .ok)
        }
        #expect(try await cacheStats(key).full == 2, "one full answer per API key: key-b was served key-a's entry")
        #expect(cache.statistics.hits == 2)
    }

    @Test("a fresh entry never answers a download, and a download is never stored", arguments: TransportKind.allCases)
    func downloadsBypass(kind: TransportKind) async throws {
        let key = "identity-download-\(kind)-\(UUID().uuidString)"
        let cache = CacheMiddleware()
        let chain = EnvironmentMiddleware(try await TestServer.environment()) --> cache --> kind.make()
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("catena-identity-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        _ = try await chain.load(try cacheRequest(key, ["max_age": "3600"]))
        var download = try cacheRequest(key, ["max_age": "3600"])
        download[option: DownloadDestination.self] = DownloadDestination(file: file)
        _ = try await chain.load(download)
        #expect(FileManager.default.fileExists(atPath: file.path), "the download was written, not answered from memory")
        let plain = try await chain.load(try cacheRequest(key, ["max_age": "3600"]))
        #expect(!plain.body.isEmpty, "a later plain GET gets a body, not a download's empty one")
    }

    @Test("concurrent calls with different credentials are not merged", arguments: TransportKind.allCases)
    func dedupeKeepsIdentities(kind: TransportKind) async throws {
        let chain =
            EnvironmentMiddleware(try await TestServer.environment()) --> DeduplicationMiddleware()
            --> BasicAuthMiddleware(hosts: [try await TestServer.authority()]) { $0[option: BasicCredentials.self] } --> kind.make()
        let right = BasicCredentials(user: "catena", password: "chains")
        let wrong = BasicCredentials(user: "catena", password: "wrong")
        async let first = chain.load(try Self.basicAuthRequest(right))
        async let second = chain.load(try Self.basicAuthRequest(wrong))
        let (good, bad) = try await (first, second)
        #expect(good.status == .ok)
        #expect(bad.status == .unauthorized, "the caller with the wrong password did not get the other caller's 200")
    }

    static func basicAuthRequest(_ credentials: BasicCredentials) throws -> APIRequest {
        var request = try APIRequest(.get, path: ["api", "basic-auth"], query: [URLQueryItem(name: "delay", value: "0.3")])
        request[option: DeduplicateRequest.self] = true
        request[option: BasicCredentials.self] = credentials
        return request
    }
}
