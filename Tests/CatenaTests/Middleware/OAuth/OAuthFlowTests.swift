@testable import Catena
import CatenaAsyncHTTPClient
import CatenaDemoServer
import Foundation
import HTTPTypes
import Testing
@testable import CatenaTestSupport

/// Every OAuth 2 flow against the demo server's authorization server, on both
/// transports. Each test registers its own client id (a tag after the base id), so
/// the server's per-client counts are its own.
@Suite("OAuth 2 flows against a real authorization server")
struct OAuthFlowTests {
    struct Stats: Decodable {
        let clientCredentials: Int
        let authorizationCode: Int
        let deviceCode: Int
        let devicePolls: Int
        let refresh: Int
        let refreshReuse: Int
        let revoked: Int
        let invalid: Int
    }

    struct Me: Decodable {
        let email: String
        let scope: String?
    }

    static let secret = "catena-service-secret"

    /// `base.mode….tag`: a client of its own for one test.
    static func clientID(_ base: String, _ modes: String...) -> String {
        ([base] + modes + ["t" + UUID().uuidString.prefix(8).lowercased()]).joined(separator: ".")
    }

    static func client(
        _ id: String, _ authentication: OAuth2Client.Authentication = .none, kind: TransportKind, clock: any RetryClock = SystemRetryClock()
    )
        async throws -> OAuth2Client
    {
        try await OAuth2Client.discover(
            issuer: try await TestServer.running().baseURL, clientID: id, authentication: authentication, loader: kind.make(), clock: clock)
    }

    static func stats(_ clientID: String) async throws -> Stats {
        let url = try await TestServer.running().baseURL.appending(path: "oauth/stats").appending(queryItems: [URLQueryItem(name: "client", value: clientID)])
        return try await AsyncHTTPClientTransport.forTests().load(APIRequest(url: url)).validateStatus().decode(Stats.self)
    }

    /// GET /api/protected/me with `token`.
    static func me(_ token: BearerToken, kind: TransportKind) async throws -> APIResponse {
        let url = try await TestServer.running().baseURL.appending(path: "api/protected/me")
        return try await kind.make().load(APIRequest(url: url, headerFields: [.authorization: "Bearer \(token.accessToken)"]))
    }

    /// GET /api/protected/me through each of `chains` at once; every call must succeed.
    static func callAtOnce(_ chains: [any HTTPLoader]) async throws {
        try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
            for chain in chains { group.addTask { try await chain.load(try APIRequest(.get, path: ["api", "protected", "me"])).status } }
            for try await status in group { #expect(status == .ok) }
        }
    }

    static func expire(_ token: BearerToken) async throws {
        let url = try await TestServer.running().baseURL.appending(path: "oauth/expire")
        _ = try await AsyncHTTPClientTransport.forTests().load(APIRequest(.post, url: url, body: .form([(name: "token", value: token.accessToken)])))
    }

    /// The authorization endpoint's redirect, read without following it (as a browser would).
    static func authorize(_ request: OAuth2AuthorizationRequest, kind: TransportKind) async throws -> URL {
        var call = APIRequest(url: request.url)
        call[option: RedirectPolicy.self] = .never
        let response = try await kind.make().load(call)
        #expect(response.status == .found)
        return try #require(response.headerFields[.location].flatMap(URL.init(string:)))
    }

    // MARK: Discovery

    @Test("discovery reads the RFC 8414 metadata, and refuses metadata that names another issuer", arguments: TransportKind.allCases)
    func discovery(kind: TransportKind) async throws {
        let base = try await TestServer.running().baseURL
        let client = try await Self.client("catena-cli", kind: kind)
        #expect(client.endpoints.token == base.appending(path: "oauth/token"))
        #expect(client.endpoints.deviceAuthorization == base.appending(path: "oauth/device"))
        #expect(client.endpoints.revocation == base.appending(path: "oauth/revoke"))
        #expect(client.endpoints.authorization == base.appending(path: "oauth/authorize"))

        let error = await #expect(throws: CatenaError.self) {
            try await OAuth2Client.discover(issuer: base.appending(path: "hostile-issuer"), clientID: "catena-cli", loader: kind.make())
        }
        #expect(error?.code == .authenticationFailed)
        #expect(error?.oauth?.code == .issuerMismatch)
    }

    @Test(
        "over HTTPS and HTTP/2 the issuer is https, discovery accepts it, and its token works",
        .enabled(if: !Timing.isThreadSanitized, "TLS runs in TLSTests there"))
    func https() async throws {
        let base = try await TLSServers.running().baseURL
        let kind = TransportKind.asyncHTTPClientHTTPS
        let client = try await OAuth2Client.discover(
            issuer: base, clientID: Self.clientID("catena-service"), authentication: .clientSecretBasic(Self.secret), loader: kind.make())
        #expect(client.endpoints.token.scheme == "https")
        let token = try await client.clientCredentials()
        let me = try await kind.make().load(
            APIRequest(url: base.appending(path: "api/protected/me"), headerFields: [.authorization: "Bearer \(token.accessToken)"]))
        #expect(me.status == .ok)
    }

    // MARK: Client credentials

    @Test(
        "client credentials, secret by Basic and by form: the token names the client and its scope; a wrong secret is invalid_client",
        arguments: TransportKind.allCases)
    func clientCredentials(kind: TransportKind) async throws {
        for basic in [true, false] {
            let id = Self.clientID("catena-service")
            let client = try await Self.client(id, basic ? .clientSecretBasic(Self.secret) : .clientSecretPost(Self.secret), kind: kind)
            let token = try await client.clientCredentials(scopes: ["read", "write"], audience: "https://api.example.com")
            #expect(token.refreshToken == nil, "RFC 6749 §4.4.3: no refresh token for client credentials")
            #expect(token.scope == "read write")
            let me = try await Self.me(token, kind: kind).validateStatus().decode(Me.self)
            #expect(me.email == id)
            #expect(try await Self.stats(id).clientCredentials == 1)

            let wrong = try await Self.client(id, basic ? .clientSecretBasic("nope") : .clientSecretPost("nope"), kind: kind)
            let error = await #expect(throws: CatenaError.self) { try await wrong.clientCredentials() }
            #expect(error?.oauth?.code == .invalidClient)
            #expect(error.map { !$0.description.contains("nope") } == true)
        }
    }

    @Test("a token request is never sent on by a redirect: a 307 would resend the secret with the form", arguments: TransportKind.allCases)
    func tokenRequestsDoNotFollowRedirects(kind: TransportKind) async throws {
        let id = Self.clientID("catena-service")
        let base = try await TestServer.running().baseURL
        let redirecting = base.appending(path: "api/redirect").appending(queryItems: [
            URLQueryItem(name: "to", value: "/oauth/token"), URLQueryItem(name: "status", value: "307"),
        ])
        let client = OAuth2Client(
            clientID: id, authentication: .clientSecretPost(Self.secret), endpoints: .init(token: redirecting), loader: kind.make())
        let error = await #expect(throws: CatenaError.self) { try await client.clientCredentials() }
        #expect(error?.code == .unacceptableStatus)
        #expect(error?.response?.status.code == 307)
        #expect(try await Self.stats(id).clientCredentials == 0, "the token endpoint never saw the request")
    }

    @Test("client credentials in a chain: 20 callers at once cause one token request, and 20 more after it expired one more", arguments: TransportKind.allCases)
    func clientCredentialsSingleFlight(kind: TransportKind) async throws {
        let id = Self.clientID("catena-service")
        let client = try await Self.client(id, .clientSecretBasic(Self.secret), kind: kind)
        let auth = TokenAuthMiddleware(hosts: [try await TestServer.authority()], client: client, signIn: .clientCredentials(scopes: ["read"]))
        let chain = EnvironmentMiddleware(try await TestServer.environment()) --> auth --> kind.make()
        try await Self.callAtOnce(Array(repeating: chain, count: 20))
        #expect(try await Self.stats(id).clientCredentials == 1)
        try await Self.expire(try #require(auth.currentToken))
        try await Self.callAtOnce(Array(repeating: chain, count: 20))
        #expect(try await Self.stats(id).clientCredentials == 2)
    }

    // MARK: Authorization code with PKCE

    @Test(
        "authorization code with PKCE: the URL carries state and an S256 challenge; the code is exchanged once, and a replay revokes its token",
        arguments: TransportKind.allCases)
    func authorizationCode(kind: TransportKind) async throws {
        let id = Self.clientID("catena-cli")
        let client = try await Self.client(id, kind: kind)
        let request = try client.authorizationRequest(redirectURI: URL(string: "http://127.0.0.1:9/callback")!, scopes: ["read"])
        let query = try #require(URLComponents(url: request.url, resolvingAgainstBaseURL: false)?.queryItems)
        #expect(query.contains(URLQueryItem(name: "code_challenge_method", value: "S256")))
        #expect(query.contains(URLQueryItem(name: "state", value: request.state)))
        #expect(query.first { $0.name == "code_challenge" }?.value?.count == 43)
        #expect(!request.url.absoluteString.contains(request.codeVerifier), "the verifier never leaves before the exchange")

        let redirect = try await Self.authorize(request, kind: kind)
        let token = try await client.exchange(redirect, for: request)
        #expect(try await Self.me(token, kind: kind).validateStatus().decode(Me.self).email == "janet.weaver@reqres.in")

        let replay = await #expect(throws: CatenaError.self) { try await client.exchange(redirect, for: request) }
        #expect(replay?.oauth?.code == .invalidGrant)
        #expect(try await Self.me(token, kind: kind).status == .unauthorized, "RFC 6749 §4.1.2: a replayed code revokes what it gave")
        #expect(try await Self.stats(id).authorizationCode == 1)
    }

    @Test("a redirect whose state is not the one sent is refused before its code is used", arguments: TransportKind.allCases)
    func wrongState(kind: TransportKind) async throws {
        let id = Self.clientID("catena-cli", "wrong-state")
        let client = try await Self.client(id, kind: kind)
        let request = try client.authorizationRequest(redirectURI: URL(string: "http://127.0.0.1:9/callback")!)
        let redirect = try await Self.authorize(request, kind: kind)
        let error = await #expect(throws: CatenaError.self) { try await client.exchange(redirect, for: request) }
        #expect(error?.oauth?.code == .stateMismatch)
        #expect(try await Self.stats(id).authorizationCode == 0)
        #expect(error.map { !$0.description.contains(request.state) } == true)

        // The server's metadata says it names itself in every redirect (RFC 9207): one
        // without `iss`, even with the right state, may be another server's, and is refused.
        #expect(client.endpoints.issuerInRedirects)
        let issuer = try #require(client.endpoints.issuer?.absoluteString)
        var forged = URLComponents(url: request.redirectURI, resolvingAgainstBaseURL: false)!
        forged.queryItems = [URLQueryItem(name: "code", value: "c"), URLQueryItem(name: "state", value: request.state)]
        let unnamed = await #expect(throws: CatenaError.self) { try await client.exchange(forged.url!, for: request) }
        #expect(unnamed?.oauth?.code == .issuerMismatch)
        #expect(unnamed?.detail?.contains("no iss") == true)

        // A redirect carrying an error, with the right state and issuer, fails with that error.
        forged.queryItems = [
            URLQueryItem(name: "error", value: "access_denied"), URLQueryItem(name: "state", value: request.state), URLQueryItem(name: "iss", value: issuer),
        ]
        let denied = await #expect(throws: CatenaError.self) { try await client.exchange(forged.url!, for: request) }
        #expect(denied?.oauth?.code == .accessDenied)

        // The right state and a second one: read two ways, so refused as forged.
        forged.queryItems = [
            URLQueryItem(name: "code", value: "c"), URLQueryItem(name: "state", value: request.state), URLQueryItem(name: "state", value: "x"),
        ]
        let twice = await #expect(throws: CatenaError.self) { try await client.exchange(forged.url!, for: request) }
        #expect(twice?.oauth?.code == .stateMismatch)
    }

    @Test("sign-in with a loopback redirect: stray requests to the listener get 404, the redirect signs in", arguments: TransportKind.allCases)
    func loopback(kind: TransportKind) async throws {
        let id = Self.clientID("catena-cli")
        let client = try await Self.client(id, kind: kind)
        let token = try await client.signInWithLoopback(scopes: ["read"], timeout: .seconds(30)) { url in
            let query = try #require(URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems)
            let redirectURI = try #require(query.first { $0.name == "redirect_uri" }?.value.flatMap(URL.init(string:)))
            #expect(redirectURI.host == "127.0.0.1")
            // A probe without a code, one with another state, and one to another path: answered 404, the listener goes on.
            #expect(try await kind.make().load(APIRequest(url: redirectURI)).status == .notFound)
            let stray = redirectURI.appending(queryItems: [URLQueryItem(name: "code", value: "stray"), URLQueryItem(name: "state", value: "stray")])
            #expect(try await kind.make().load(APIRequest(url: stray)).status == .notFound)
            #expect(try await kind.make().load(APIRequest(url: redirectURI.deletingLastPathComponent().appending(path: "other"))).status == .notFound)
            // The browser: the server redirects to the listener, which answers the page.
            let page = try await kind.make().load(APIRequest(url: url))
            #expect(page.status == .ok)
            #expect(String(decoding: page.body, as: UTF8.self).contains("Signed in"))
        }
        #expect(try await Self.me(token, kind: kind).status == .ok)
    }

    @Test("a loopback listener stops at its timeout and when its task is cancelled, and frees its port")
    func loopbackEnds() async throws {
        let listener = try LoopbackRedirectListener()
        let error = await #expect(throws: CatenaError.self) { try await listener.redirect(timeout: .milliseconds(300)) }
        #expect(error?.code == .timedOut)
        let again = await #expect(throws: CatenaError.self) { try await listener.redirect() }
        #expect(again?.code == .cancelled, "one wait per listener")

        let second = try LoopbackRedirectListener()
        let waiting = Task { try await second.redirect(timeout: .seconds(60)) }
        try await Task.sleep(for: .milliseconds(50))
        waiting.cancel()
        let cancelled = await #expect(throws: CatenaError.self) { try await waiting.value }
        #expect(cancelled?.code == .cancelled)
        // The port is closed: a connection is refused.
        let refused = await #expect(throws: CatenaError.self) {
            try await AsyncHTTPClientTransport.forTests(timeout: .seconds(5)).load(APIRequest(url: second.redirectURI))
        }
        #expect(refused?.code == .cannotConnect)
    }

    // MARK: Device authorization

    @Test("device flow: the code to show, pending until approved, then a token with a refresh token", arguments: TransportKind.allCases)
    func device(kind: TransportKind) async throws {
        let id = Self.clientID("catena-cli")
        let clock = VirtualClock()
        let client = try await Self.client(id, kind: kind, clock: clock)
        let shown = Locked<OAuth2DeviceAuthorization?>(nil)
        let token = try await client.signInWithDevice(scopes: ["read"]) { device in shown.withLock { $0 = device } }
        let device = try #require(shown.withLock { $0 })
        #expect(device.userCode.count == 9)
        #expect(device.verificationURI.path == "/oauth/device/verify")
        #expect(!device.description.contains(device.deviceCode))
        #expect(token.refreshToken != nil)
        #expect(try await Self.me(token, kind: kind).status == .ok)
        let stats = try await Self.stats(id)
        #expect(stats.deviceCode == 1)
        #expect(stats.devicePolls == 2, "one authorization_pending, then the token")
        #expect(clock.waits == [device.interval, device.interval])
    }

    @Test("device flow: slow_down adds 5 s to the interval; expired and denied codes end the flow with their error", arguments: TransportKind.allCases)
    func deviceHostile(kind: TransportKind) async throws {
        let clock = VirtualClock()
        let slow = try await Self.client(Self.clientID("catena-cli", "slow-down"), kind: kind, clock: clock)
        let device = try await slow.authorizeDevice()
        _ = try await slow.token(for: device)
        #expect(clock.waits == [device.interval, device.interval + .seconds(5), device.interval + .seconds(5)])

        for (mode, code) in [("expired", OAuth2Error.Code.expiredToken), ("denied", .accessDenied)] {
            let client = try await Self.client(Self.clientID("catena-cli", mode), kind: kind, clock: VirtualClock())
            let error = await #expect(throws: CatenaError.self) { try await client.signInWithDevice { _ in } }
            #expect(error?.oauth?.code == code, "\(mode)")
        }
    }

    @Test("the device flow's wait ends at once when its task is cancelled")
    func deviceCancelled() async throws {
        let client = try await Self.client(Self.clientID("catena-cli", "denied"), kind: .asyncHTTPClient)
        let device = try await client.authorizeDevice()
        let polling = Task { try await client.token(for: device) }
        polling.cancel()
        let error = await #expect(throws: CatenaError.self) { try await polling.value }
        #expect(error?.code == .cancelled)
    }
}
