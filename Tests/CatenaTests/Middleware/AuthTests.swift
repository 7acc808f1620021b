import Catena
import CatenaAsyncHTTPClient
import CatenaTesting
import Foundation
import HTTPTypes
import Synchronization
import Testing
@testable import CatenaTestSupport

@Suite("Authentication")
struct AuthTests {
    struct Me: Decodable { let email: String }

    /// Signs in with the demo server's password grant through ``OAuth2Client/requestToken(_:)``
    /// (the way to reach a grant Catena has no flow for) and renews with the refresh-token grant.
    func oauth() async throws -> @Sendable (BearerToken?) async throws -> BearerToken {
        let base = try await TestServer.running().baseURL
        let client = OAuth2Client(
            clientID: "catena-tests", endpoints: .init(token: base.appending(path: "oauth/token")), loader: AsyncHTTPClientTransport.forTests())
        return { current in
            if let current, current.refreshToken != nil, let renewed = try? await client.refresh(current) { return renewed }
            return try await client.requestToken([
                (name: "grant_type", value: "password"), (name: "username", value: "eve.holt@reqres.in"), (name: "password", value: "cityslicka"),
            ])
        }
    }

    @Test("Basic credentials (a server's or a proxy's) never print their password: description, interpolation, dump, debug description")
    func basicCredentialsNeverPrint() {
        let credentials = BasicCredentials(user: "ann", password: "proxy-pass-7")
        var dumped = ""
        dump(credentials, to: &dumped)
        var optionDumped = ""
        dump(ProxySettings(.init(host: "127.0.0.1", port: 3128, credentials: credentials)), to: &optionDumped)
        for text in [credentials.description, "\(credentials)", String(reflecting: credentials), dumped, "\([credentials])", optionDumped] {
            #expect(!text.contains("proxy-pass-7"), "\(text)")
        }
        #expect(credentials.description.contains("ann"))
    }

    func expire(_ token: String) async throws {
        let base = try await TestServer.running().baseURL
        _ = try await AsyncHTTPClientTransport.forTests().load(
            APIRequest(.post, url: base.appending(path: "oauth/expire"), body: .form([(name: "token", value: token)])))
    }

    @Test("basic auth reaches the configured host, and only that host")
    func basicAuth() async throws {
        let server = try await TestServer.running()
        let chain =
            BasicAuthMiddleware(hosts: [try await TestServer.authority()], credentials: BasicCredentials(user: "catena", password: "chains"))
            --> AsyncHTTPClientTransport.forTests()
        #expect(try await chain.load(try APIRequest(.get, baseURL: server.baseURL, path: ["api", "basic-auth"])).status == .ok)

        let wrong =
            BasicAuthMiddleware(hosts: [try await TestServer.authority()], credentials: BasicCredentials(user: "catena", password: "nope"))
            --> AsyncHTTPClientTransport.forTests()
        #expect(try await wrong.load(try APIRequest(.get, baseURL: server.baseURL, path: ["api", "basic-auth"])).status == .unauthorized)

        var perRequest = try APIRequest(.get, baseURL: server.baseURL, path: ["api", "basic-auth"])
        perRequest[option: BasicCredentials.self] = BasicCredentials(user: "catena", password: "chains")
        #expect(try await wrong.load(perRequest).status == .ok)

        let elsewhere = try await chain.load(try APIRequest(.get, urlString: "http://localhost:\(server.port)/api/echo")).decode(Echo.self)
        #expect(elsewhere.header("authorization") == nil)
    }

    @Test("an auth, cache or de-duplication loader placed before the environment says so instead of silently doing nothing")
    func misordered() async throws {
        let mock = MockTransport()
        mock.respond()
        let env = try await TestServer.environment()
        let token =
            TokenAuthMiddleware(hosts: [try await TestServer.authority()]) { _ in BearerToken(accessToken: "t") } --> EnvironmentMiddleware(env) --> mock
        let basic =
            BasicAuthMiddleware(hosts: [try await TestServer.authority()], credentials: .init(user: "u", password: "p")) --> EnvironmentMiddleware(env) --> mock
        let cache = CacheMiddleware() --> EnvironmentMiddleware(env) --> mock
        let dedupe = DeduplicationMiddleware() --> EnvironmentMiddleware(env) --> mock
        for chain in [token, basic, cache, dedupe] as [any HTTPLoader] {
            let error = await #expect(throws: CatenaError.self) { try await chain.load(try APIRequest(.get, path: ["api", "users"])) }
            #expect(error?.code == .invalidRequest)
            #expect(error?.detail?.contains("put it after EnvironmentMiddleware") == true)
        }
        #expect(mock.requests.isEmpty)
    }

    @Test("OAuth 2: the first request logs in; an expired token is refreshed with the refresh-token grant")
    func oauthFlow() async throws {
        let env = try await TestServer.environment()
        let auth = TokenAuthMiddleware(hosts: [try await TestServer.authority()], refresh: try await oauth())
        let chain = EnvironmentMiddleware(env) --> auth --> AsyncHTTPClientTransport.forTests()
        let me = try await chain.load(try APIRequest(.get, path: ["api", "protected", "me"])).validateStatus().decode(Me.self)
        #expect(me.email == "eve.holt@reqres.in")
        #expect(auth.refreshCount == 1)
        let first = try #require(auth.currentToken)

        try await expire(first.accessToken)
        #expect(try await chain.load(try APIRequest(.get, path: ["api", "protected", "me"])).status == .ok)
        #expect(auth.refreshCount == 2)
        #expect(auth.currentToken?.accessToken != first.accessToken)
    }

    @Test("a 401 that a ValidationMiddleware loader below turned into an error still triggers one refresh and a resend")
    func refreshWithValidationBelow() async throws {
        let env = try await TestServer.environment()
        let auth = TokenAuthMiddleware(hosts: [try await TestServer.authority()], refresh: try await oauth())
        let chain = EnvironmentMiddleware(env) --> auth --> ValidationMiddleware() --> AsyncHTTPClientTransport.forTests()
        _ = try await chain.load(try APIRequest(.get, path: ["api", "protected", "me"]))
        try await expire(try #require(auth.currentToken).accessToken)
        let me = try await chain.load(try APIRequest(.get, path: ["api", "protected", "me"])).decode(Me.self)
        #expect(me.email == "eve.holt@reqres.in")
        #expect(auth.refreshCount == 2)
    }

    @Test("100 requests that get 401 at once cause exactly one refresh, and all succeed")
    func singleFlightRefresh() async throws {
        let env = try await TestServer.environment()
        let auth = TokenAuthMiddleware(hosts: [try await TestServer.authority()], refresh: try await oauth())
        let chain = EnvironmentMiddleware(env) --> auth --> AsyncHTTPClientTransport.forTests()
        _ = try await chain.load(try APIRequest(.get, path: ["api", "protected", "me"])).validateStatus()
        try await expire(try #require(auth.currentToken).accessToken)

        try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
            for _ in 0..<100 { group.addTask { try await chain.load(try APIRequest(.get, path: ["api", "protected", "me"])).status } }
            var statuses: [HTTPResponse.Status] = []
            for try await status in group { statuses.append(status) }
            #expect(statuses.count == 100)
            #expect(statuses.allSatisfy { $0 == .ok })
        }
        #expect(auth.refreshCount == 2, "one login, then one refresh for all 100")
    }

    @Test("a failed refresh fails every waiting request with that error, and none is sent again")
    func failedRefreshNoReplay() async throws {
        struct RefreshDenied: Error {}
        let env = try await TestServer.environment()
        let refreshes = Atomic<Int>(0)
        let auth = TokenAuthMiddleware(hosts: [try await TestServer.authority()], token: BearerToken(accessToken: "not-a-live-token")) { _ in
            refreshes.add(1, ordering: .relaxed)
            // Long enough that every one of the 20 401s arrives while it runs, also on a
            // loaded machine (a 401 after a failed refresh rightly tries a new one).
            try await Task.sleep(for: Timing.stretch(.seconds(3)))
            throw RefreshDenied()
        }
        let counter = Counter()
        let chain = EnvironmentMiddleware(env) --> auth --> counter --> AsyncHTTPClientTransport.forTests()
        let errors = try await withThrowingTaskGroup(of: CatenaError?.self) { group in
            for _ in 0..<20 {
                group.addTask {
                    do { _ = try await chain.load(try APIRequest(.get, path: ["api", "protected", "me"])); return nil } catch { return error as? CatenaError }
                }
            }
            return try await group.reduce(into: [CatenaError?]()) { $0.append($1) }
        }
        #expect(errors.count == 20)
        #expect(errors.allSatisfy { $0?.code == .authenticationFailed && $0?.underlyingError is RefreshDenied })
        #expect(refreshes.load(ordering: .relaxed) == 1)
        #expect(counter.count.load(ordering: .relaxed) == 20, "each request was sent once and never replayed")
    }

    @Test("the token never reaches another host, also after a redirect", arguments: TransportKind.allCases)
    func tokenStaysHome(kind: TransportKind) async throws {
        let server = try await TestServer.running()
        let auth = TokenAuthMiddleware(hosts: [try await TestServer.authority()], token: BearerToken(accessToken: "t0ken-for-127")) { _ in
            BearerToken(accessToken: "t0ken-for-127")
        }
        let chain = auth --> kind.make()

        let home = try await chain.load(try APIRequest(.get, baseURL: server.baseURL, path: ["api", "echo"])).decode(Echo.self)
        #expect(home.header("authorization") == "Bearer t0ken-for-127")

        let direct = try await chain.load(try APIRequest(.get, urlString: "http://localhost:\(server.port)/api/echo")).decode(Echo.self)
        #expect(direct.header("authorization") == nil)

        let redirected = try await chain.load(
            try APIRequest(
                .get, baseURL: server.baseURL, path: ["api", "redirect-host"],
                query: [
                    URLQueryItem(name: "host", value: "localhost"), URLQueryItem(name: "to", value: "/api/echo"),
                ]))
        #expect(redirected.status == .ok)
        #expect(try redirected.decode(Echo.self).header("authorization") == nil)
    }
}

/// A middleware whose reset takes a while, to observe requests arriving meanwhile.
final class SlowReset: HTTPMiddleware {
    let resets = Atomic<Int>(0)
    func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        try await next.load(request)
    }
    func reset() async {
        resets.add(1, ordering: .relaxed)
        try? await Task.sleep(for: .milliseconds(300))
    }
}
