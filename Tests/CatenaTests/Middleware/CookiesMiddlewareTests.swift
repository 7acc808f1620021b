import Catena
import Foundation
import Testing
@testable import CatenaTestSupport

/// The cookie jar against the demo server, which sets the cookies a test asks for
/// (`/api/cookies/set`) and echoes the Cookie field it receives (`/api/echo`).
@Suite("CookieMiddleware against the demo server")
struct CookieIntegrationTests {
    static func set(_ cookies: String...) throws -> APIRequest {
        try APIRequest(.get, path: ["api", "cookies", "set"], query: cookies.map { URLQueryItem(name: "cookie", value: $0) })
    }

    /// The demo server's environment, then the cookies, then the transport.
    static func chain(_ kind: TransportKind, _ cookies: CookieMiddleware) async throws -> any HTTPLoader {
        let server = kind == .asyncHTTPClientHTTPS ? try await TLSServers.running() : try await TestServer.running()
        return EnvironmentMiddleware(try #require(ServerEnvironment(baseURL: server.baseURL))) --> cookies --> kind.make()
    }

    static func echoCookie(_ chain: some HTTPLoader, path: [String] = ["api", "echo"]) async throws -> String? {
        try await chain.load(try APIRequest(.get, path: path)).decode(Echo.self).header("cookie")
    }

    @Test("a session cookie comes back; Path scopes it; Max-Age=0 deletes it; reset() forgets all", arguments: TransportKind.withHTTPS)
    func session(kind: TransportKind) async throws {
        let jar = CookieJar()
        let chain = try await Self.chain(kind, CookieMiddleware(jar: jar))
        #expect(try await Self.echoCookie(chain) == nil)
        let response = try await chain.load(try Self.set("session=abc123; Path=/api; HttpOnly", "other=1; Path=/elsewhere"))
        #expect(response.status == .ok)
        #expect(jar.all.count == 2)
        #expect(try await Self.echoCookie(chain) == "session=abc123")
        _ = try await chain.load(try Self.set("session=; Max-Age=0; Path=/api"))
        #expect(try await Self.echoCookie(chain) == nil)
        _ = try await chain.load(try Self.set("again=1; Path=/"))
        #expect(try await Self.echoCookie(chain) == "again=1")
        await chain.reset()
        #expect(jar.all.isEmpty)
        #expect(try await Self.echoCookie(chain) == nil)
    }

    @Test("a Secure cookie is kept from HTTPS and sent over HTTPS only; from plain HTTP it is refused")
    func secure() async throws {
        let jar = CookieJar()
        let https = try await Self.chain(.asyncHTTPClientHTTPS, CookieMiddleware(jar: jar))
        _ = try await https.load(try Self.set("token=t1; Secure; Path=/"))
        #expect(try await Self.echoCookie(https) == "token=t1")
        // The same host (127.0.0.1) over plain HTTP: the Secure cookie stays behind.
        let plain = try await Self.chain(.asyncHTTPClient, CookieMiddleware(jar: jar))
        #expect(try await Self.echoCookie(plain) == nil)
        _ = try await plain.load(try Self.set("sneaky=1; Secure; Path=/"))
        #expect(jar.all.map(\.name) == ["token"])
    }

    @Test("a Cookie field of the request's own is kept, the jar's after it", arguments: TransportKind.allCases)
    func ownCookie(kind: TransportKind) async throws {
        let chain = try await Self.chain(kind, CookieMiddleware())
        _ = try await chain.load(try Self.set("jar=1; Path=/"))
        var request = try APIRequest(.get, path: ["api", "echo"])
        request.headerFields[.cookie] = "mine=2"
        let sent = try await chain.load(request).decode(Echo.self).header("cookie")
        #expect(sent == "mine=2; jar=1")
    }

    @Test("above EnvironmentMiddleware it fails at once, saying where it belongs")
    func misplaced() async throws {
        let chain = CookieMiddleware() --> (try await TransportKind.asyncHTTPClient.chain())
        let error = await #expect(throws: CatenaError.self) { try await chain.load(try APIRequest(.get, path: ["api", "echo"])) }
        #expect(error?.code == .invalidRequest)
        #expect(error.map { "\($0)" }?.contains("below EnvironmentMiddleware") == true)
    }
}
