// Basic and bearer credentials bound to origins, an OAuth 2 token endpoint, and logout.
// Runs against the embedded demo server: `swift run --enable-all-traits Authentication`.

// snippet.hide
import CatenaDemoServer
import Foundation

let server = try await DemoServer.start()
let origin = "127.0.0.1:\(server.port)"
let environment = ServerEnvironment(scheme: "http", host: "127.0.0.1", port: server.port)
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
let oauth = OAuth2PasswordFlow(
    tokenURL: server.baseURL.appendingPathComponent("oauth/token"),
    username: "janet.weaver@reqres.in", password: "secret", loader: transport)
let auth = TokenAuthMiddleware(hosts: [origin], refresh: oauth.refresh)
let chain = ResetGuardMiddleware() --> EnvironmentMiddleware(environment) --> auth --> transport

// The first call logs in; later ones reuse the token, and a 401 refreshes it once.
let me = try await chain.load(try APIRequest(.get, path: ["api", "protected", "me"]))
print(me.status, auth.refreshCount)  // 200 OK 1
// snippet.end

// snippet.logout
await chain.reset()  // cancels what is in flight, forgets the token
// snippet.end

// snippet.hide
await server.stop()
