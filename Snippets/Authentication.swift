// Basic and bearer credentials bound to origins, OAuth 2 sign-in (client credentials,
// device, authorization code with PKCE), stored tokens, and logout.
// Runs against the embedded demo server: `swift run --enable-all-traits Authentication`.

// snippet.hide
import CatenaDemoServer
import Foundation

let server = try await DemoServer.start()
let origin = "127.0.0.1:\(server.port)"
let environment = ServerEnvironment(scheme: "http", host: "127.0.0.1", port: server.port)
let tokens = FileManager.default.temporaryDirectory.appending(path: "catena-snippet-\(UUID().uuidString)")
// snippet.show
import Catena
import CatenaAsyncHTTPClient

// snippet.basic
let basic =
    EnvironmentMiddleware(environment)
    --> BasicAuthMiddleware(hosts: [origin], credentials: BasicCredentials(user: "catena", password: "chains"))
    --> AsyncHTTPClientTransport()
let answer = try await basic.load(try APIRequest(.get, path: ["api", "basic-auth"]))
print(answer.status)  // 200 OK; a request to any other origin goes out without the header
// snippet.end

// snippet.bearer
let transport = AsyncHTTPClientTransport()
// A service signs in as itself: the client credentials grant, with a secret.
let service = try await OAuth2Client.discover(
    issuer: server.baseURL, clientID: "catena-service", authentication: .clientSecretBasic("catena-service-secret"), loader: transport)
let auth = TokenAuthMiddleware(hosts: [origin], client: service, signIn: .clientCredentials(scopes: ["read"]))
let chain = ResetGuardMiddleware() --> EnvironmentMiddleware(environment) --> auth --> transport

// The first call gets a token; later ones reuse it, and a 401 or its expiry gets a new one,
// once for however many calls need it.
let me = try await chain.load(try APIRequest(.get, path: ["api", "protected", "me"]))
print(me.status, auth.refreshCount)  // 200 OK 1
// snippet.end

// snippet.device
// A command-line tool signs a person in: show a code, which they enter in any browser.
let cli = try await OAuth2Client.discover(issuer: server.baseURL, clientID: "catena-cli", loader: transport)
let signedIn = try await cli.signInWithDevice(scopes: ["read"]) { device in
    print("Visit \(device.verificationURI) and enter \(device.userCode)")
}
// Kept between runs (in the Keychain, use KeychainTokenStorage), refreshed and rotated as needed.
let storage = FileTokenStorage(directory: tokens)
try storage.save(signedIn, named: "demo")
let user = TokenAuthMiddleware(hosts: [origin], client: cli, storage: storage, storageKey: "demo")
let userChain = ResetGuardMiddleware() --> EnvironmentMiddleware(environment) --> user --> transport
print(try await userChain.load(try APIRequest(.get, path: ["api", "protected", "me"])).status)  // 200 OK
// snippet.end

// snippet.pkce
// An app with a browser: authorization code with PKCE, redirected to 127.0.0.1 (RFC 8252).
let browserToken = try await cli.signInWithLoopback(scopes: ["read"]) { url in
    // An app opens `url` in the browser (or ASWebAuthenticationSession on Apple platforms,
    // with `authorizationRequest(redirectURI:)` and `exchange(_:for:)`). The demo server
    // approves by itself, so following its redirect here is enough.
    _ = try await transport.load(APIRequest(url: url))
}
print(browserToken)  // BearerToken(access token, refresh token, expires …, scope read): never the values
// snippet.end

// snippet.logout
await chain.reset()  // cancels what is in flight, forgets the token
await userChain.reset()  // also revokes the token at the server and removes it from storage
// snippet.end

// snippet.hide
try? FileManager.default.removeItem(at: tokens)
await server.stop()
