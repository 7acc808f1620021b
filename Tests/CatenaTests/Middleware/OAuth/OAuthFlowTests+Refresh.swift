@testable import Catena
import CatenaAsyncHTTPClient
import CatenaDemoServer
import Foundation
import HTTPTypes
import Testing
@testable import CatenaTestSupport

/// Refresh with rotation, stored tokens, revocation on reset.
extension OAuthFlowTests {
    // MARK: Refresh, rotation, storage, revocation

    @Test(
        "refresh with rotation: 20 callers after expiry cause one refresh, the rotated token is stored, a reused refresh token revokes the family",
        arguments: TransportKind.allCases)
    func rotation(kind: TransportKind) async throws {
        let id = Self.clientID("catena-cli")
        let client = try await Self.client(id, kind: kind, clock: VirtualClock())
        let first = try await client.signInWithDevice { _ in }
        let storage = FileTokenStorage(directory: try temporaryDirectory())
        let auth = TokenAuthMiddleware(hosts: [try await TestServer.authority()], client: client, storage: storage, storageKey: "demo", token: first)
        let chain = EnvironmentMiddleware(try await TestServer.environment()) --> auth --> kind.make()
        try await Self.expire(first)
        try await Self.callAtOnce(Array(repeating: chain, count: 20))
        #expect(try await Self.stats(id).refresh == 1)
        let second = try #require(auth.currentToken)
        #expect(second.refreshToken != first.refreshToken, "the server rotated the refresh token")
        #expect(try storage.token(named: "demo")?.refreshToken == second.refreshToken, "the rotated token is stored")

        // Someone replays the first refresh token: the server revokes the whole family.
        let replay = await #expect(throws: CatenaError.self) { try await client.refresh(first) }
        #expect(replay?.oauth?.code == .invalidGrant)
        #expect(try await Self.stats(id).refreshReuse == 1)
        let refused = await #expect(throws: CatenaError.self) { try await chain.load(try APIRequest(.get, path: ["api", "protected", "me"])) }
        #expect(refused?.code == .authenticationFailed)
        #expect(refused?.oauth?.code == .invalidGrant, "sign in again")
        #expect(try storage.token(named: "demo") == nil, "a refused refresh token is not kept")
    }

    @Test("a stored token is read once and used; reset() revokes it at the server and removes it", arguments: TransportKind.allCases)
    func storedAndRevoked(kind: TransportKind) async throws {
        let id = Self.clientID("catena-cli")
        let client = try await Self.client(id, kind: kind, clock: VirtualClock())
        let token = try await client.signInWithDevice { _ in }
        let storage = FileTokenStorage(directory: try temporaryDirectory())
        try storage.save(token, named: "demo")

        let auth = TokenAuthMiddleware(hosts: [try await TestServer.authority()], client: client, storage: storage, storageKey: "demo")
        let chain = ResetGuardMiddleware() --> EnvironmentMiddleware(try await TestServer.environment()) --> auth --> kind.make()
        #expect(try await chain.load(try APIRequest(.get, path: ["api", "protected", "me"])).status == .ok)
        #expect(auth.currentToken?.accessToken == token.accessToken)
        #expect(try await Self.stats(id).refresh == 0)

        await chain.reset()
        #expect(try storage.token(named: "demo") == nil)
        #expect(try await Self.stats(id).revoked == 2, "the refresh token, then the access token")
        #expect(try await Self.me(token, kind: kind).status == .unauthorized)
        let refresh = await #expect(throws: CatenaError.self) { try await client.refresh(token) }
        #expect(refresh?.oauth?.code == .invalidGrant)
        // Signed out: the next call says so rather than signing in by itself.
        let next = await #expect(throws: CatenaError.self) { try await chain.load(try APIRequest(.get, path: ["api", "protected", "me"])) }
        #expect(next?.code == .authenticationFailed)
    }

    @Test("a slow token endpoint: a reset ends the waiting callers at once; the token that arrives after it is revoked, not stored")
    func slowRefreshReset() async throws {
        let id = Self.clientID("catena-service", "slow")
        let client = try await Self.client(id, .clientSecretPost(Self.secret), kind: .asyncHTTPClient)
        let storage = FileTokenStorage(directory: try temporaryDirectory())
        // A token request that a reset cannot cancel, as a transport may not; it says when it has begun.
        let begun = AsyncStream<Void>.makeStream()
        let signIn = OAuth2SignIn { client in
            begun.continuation.yield()
            return try await Task.detached { try await client.clientCredentials() }.value
        }
        let auth = TokenAuthMiddleware(hosts: [try await TestServer.authority()], client: client, signIn: signIn, storage: storage, storageKey: "service")
        let chain = EnvironmentMiddleware(try await TestServer.environment()) --> auth --> AsyncHTTPClientTransport.forTests()
        let calls = (0..<5).map { _ in Task { try await chain.load(try APIRequest(.get, path: ["api", "protected", "me"])) } }
        for await _ in begun.stream { break }
        let deadline = ContinuousClock.now + .seconds(10 * Timing.factor)
        while auth.waitingForRefresh < 5, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        try #require(auth.waitingForRefresh == 5)
        await auth.reset()
        for call in calls {
            let error = await #expect(throws: CatenaError.self) { try await call.value }
            #expect(error?.code == .cancelled)
        }
        // The 1.5 s answer arrives after the reset: it is revoked, and never stored.
        while try await Self.stats(id).revoked == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(try await Self.stats(id).revoked == 1)
        #expect(try storage.token(named: "service") == nil)
    }

    @Test("two middlewares sharing a stored token (two runs of a command) spend its refresh token once", arguments: TransportKind.allCases)
    func sharedStorage(kind: TransportKind) async throws {
        let id = Self.clientID("catena-cli")
        let client = try await Self.client(id, kind: kind, clock: VirtualClock())
        let token = try await client.signInWithDevice { _ in }
        let storage = FileTokenStorage(directory: try temporaryDirectory())
        try storage.save(token, named: "shared")
        try await Self.expire(token)
        let environment = try await TestServer.environment()
        let authority = try await TestServer.authority()
        let chains = (0..<2).map { _ in
            EnvironmentMiddleware(environment) --> TokenAuthMiddleware(hosts: [authority], client: client, storage: storage, storageKey: "shared")
                --> kind.make()
        }
        try await Self.callAtOnce(chains)
        let stats = try await Self.stats(id)
        #expect(stats.refresh == 1 && stats.refreshReuse == 0, "the second took the first's token from storage")
    }

    func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appending(path: "catena-tokens-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}
