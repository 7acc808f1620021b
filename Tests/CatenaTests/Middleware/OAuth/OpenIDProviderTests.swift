@testable import Catena
import CatenaAsyncHTTPClient
import Foundation
import HTTPTypes
import Testing
@testable import CatenaTestSupport

/// The OAuth 2 client against an OpenID provider the project did not write (Debian's
/// Glewlwyd), on both transports: discovery where only OpenID Connect publishes it, the
/// `nonce` it requires, its exact redirect URIs, its empty error answers and its refusal
/// of a public client's revocation. One provider serves the whole run.
/// One at a time: the public client has one redirect URI, so one listener on its port.
/// Not under ThreadSanitizer: starting the provider (a shell script, sqlite3, openssl,
/// a dozen curl calls) beside the instrumented suite starved the demo server until
/// other suites' pooled calls timed out (CI, 2026-11-28); the flows' Catena code runs
/// under it in OAuthFlowTests against the demo server.
@Suite(
    "OAuth 2 against an OpenID provider (Glewlwyd)", .serialized,
    .enabled(if: OpenIDProvider.testsRun, "apt-get install glewlwyd sqlite3 jq (.ci/run does)"),
    .enabled(if: !Timing.isThreadSanitized, "external processes starve the instrumented run; see the comment"))
struct OpenIDProviderTests {
    @Test(
        "discovery at ISSUER/.well-known/openid-configuration; client credentials by Basic and by post; an empty 403 names its status",
        arguments: TransportKind.allCases)
    func discoveryAndClientCredentials(kind: TransportKind) async throws {
        let provider = try await OpenIDProvider.running()
        let loader = kind.make()
        // The provider answers 404 at every RFC 8414 place: only the OpenID one works.
        let oauthPlace = try await loader.load(APIRequest(url: try OAuth2Client.metadataURL(for: provider.issuer)))
        #expect(oauthPlace.status == .notFound)
        for authentication in [
            OAuth2Client.Authentication.clientSecretBasic(OpenIDProvider.confidentialSecret), .clientSecretPost(OpenIDProvider.confidentialSecret),
        ] {
            let client = try await OAuth2Client.discover(
                issuer: provider.issuer, clientID: OpenIDProvider.confidentialClient, authentication: authentication, loader: loader)
            #expect(client.endpoints.issuer?.absoluteString == provider.issuer.absoluteString)
            #expect(client.endpoints.deviceAuthorization != nil && client.endpoints.revocation != nil)
            // It names its token type `bearer`, in lower case.
            let token = try await client.clientCredentials(scopes: ["catena"])
            #expect(!token.accessToken.isEmpty)
            #expect(token.expiresAt != nil)
        }
        // A wrong secret: an empty 403, which is a refusal, not a decoding failure.
        let wrong = try await OAuth2Client.discover(
            issuer: provider.issuer, clientID: OpenIDProvider.confidentialClient, authentication: .clientSecretBasic("not-the-secret"), loader: loader)
        let error = await #expect(throws: CatenaError.self) { try await wrong.clientCredentials(scopes: ["catena"]) }
        #expect(error?.code == .authenticationFailed)
        #expect(error?.response?.status.code == 403)
        #expect(error?.detail?.contains("403") == true, "\(String(describing: error))")
        #expect(!String(describing: error).contains("not-the-secret"))
    }

    @Test(
        "code + PKCE at a fixed loopback port with a nonce; the refresh token rotates; a public client's refused revocation still forgets the token",
        arguments: TransportKind.allCases)
    func codeRefreshAndRevocation(kind: TransportKind) async throws {
        let provider = try await OpenIDProvider.running()
        let client = try await OAuth2Client.discover(issuer: provider.issuer, clientID: OpenIDProvider.publicClient, loader: kind.make())
        // Redirect URIs are compared exactly: the listener takes the registered port.
        let token = try await client.signInWithLoopback(scopes: ["openid", "catena", "offline_access"], port: provider.redirectPort, timeout: .seconds(60)) {
            url in
            let items = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []
            #expect(items.contains { $0.name == "nonce" && ($0.value?.count ?? 0) >= 43 }, "openid asks for a nonce")
            try await provider.approve(authorization: url)
        }
        let firstRefresh = try #require(token.refreshToken)

        // Rotation: the new refresh token replaces the old, which is spent.
        let renewed = try await client.refresh(token)
        #expect(renewed.accessToken != token.accessToken)
        #expect(renewed.refreshToken != nil && renewed.refreshToken != firstRefresh)
        let replay = await #expect(throws: CatenaError.self) { try await client.refresh(token) }
        // An empty 400: a refusal that names its status.
        #expect(replay?.code == .authenticationFailed, "\(String(describing: replay))")
        #expect(!String(describing: replay).contains(firstRefresh))

        // Without a nonce the provider refuses the code request: the nonce is what makes it work.
        let bare = try client.authorizationRequest(redirectURI: provider.redirectURI, scopes: ["openid", "catena"])
        var stripped = try #require(URLComponents(url: bare.url, resolvingAgainstBaseURL: false))
        stripped.queryItems = stripped.queryItems?.filter { $0.name != "nonce" }
        let refused = try await provider.approve(authorization: try #require(stripped.url))
        #expect(refused.query?.contains("error=invalid_request") == true, "\(refused)")

        // A public client may not revoke here (401): logging out still forgets the token.
        let revoke = await #expect(throws: CatenaError.self) { try await client.revoke(renewed) }
        #expect(revoke?.response?.status == .unauthorized)
        let auth = TokenAuthMiddleware(hosts: ["127.0.0.1:\(provider.base.port ?? 0)"], client: client, token: renewed)
        #expect(auth.currentToken != nil)
        await auth.reset()
        #expect(auth.currentToken == nil)
    }

    @Test("the device grant: pending until Alice enters the code, then a token", arguments: TransportKind.allCases)
    func deviceGrant(kind: TransportKind) async throws {
        let provider = try await OpenIDProvider.running()
        let client = try await OAuth2Client.discover(issuer: provider.issuer, clientID: OpenIDProvider.publicClient, loader: kind.make())
        let device = try await client.authorizeDevice(scopes: ["openid", "catena", "offline_access"])
        async let token = client.token(for: device)
        try await provider.approve(userCode: device.userCode)
        let signedIn = try await token
        #expect(!signedIn.accessToken.isEmpty)
        #expect(signedIn.refreshToken != nil)
    }
}
