import Catena
import Foundation
import Testing
@testable import CatenaTestSupport

/// The cookie jar against the demo server, which sets the cookies a test asks for
/// (`/api/cookies/set`) and echoes the Cookie field it receives (`/api/echo`).
@Suite("CookieMiddleware against the demo server")
struct CookieMiddlewareTests {
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

    @Test("RFC 6265bis: plain HTTP cannot overwrite or delete a Secure cookie; __Secure- and __Host- prefixes are enforced")
    func strictSecure() async throws {
        let jar = CookieJar()
        let https = try await Self.chain(.asyncHTTPClientHTTPS, CookieMiddleware(jar: jar))
        let plain = try await Self.chain(.asyncHTTPClient, CookieMiddleware(jar: jar))
        _ = try await https.load(try Self.set("sid=secure1; Secure; Path=/"))
        _ = try await plain.load(try Self.set("sid=plain; Path=/"))
        _ = try await plain.load(try Self.set("sid=plain2; Path=/api"))
        _ = try await plain.load(try Self.set("sid=; Max-Age=0; Path=/"))
        #expect(jar.all.map { "\($0.name)=\($0.value)" } == ["sid=secure1"], "\(jar.all)")
        #expect(try await Self.echoCookie(https) == "sid=secure1")
        // Another name from plain HTTP is fine.
        _ = try await plain.load(try Self.set("theme=dark; Path=/"))
        #expect(Set(jar.all.map(\.name)) == ["sid", "theme"])

        _ = try await https.load(
            try Self.set(
                "__Secure-a=1; Path=/", "__Secure-b=2; Secure; Path=/", "__Host-c=3; Secure; Path=/api", "__Host-d=4; Secure; Path=/; Domain=127.0.0.1",
                "__host-e=5; Path=/", "__Host-f=6; Secure; Path=/"))
        #expect(Set(jar.all.map(\.name)) == ["sid", "theme", "__Secure-b", "__Host-f"], "\(jar.all.map(\.name))")
        _ = try await plain.load(try Self.set("__Secure-g=7; Secure; Path=/"))
        #expect(!jar.all.contains { $0.name == "__Secure-g" })
    }

    @Test("a Set-Cookie whose value holds a comma keeps its attributes, beside another Set-Cookie", arguments: TransportKind.allCases)
    func commaInValue(kind: TransportKind) async throws {
        let jar = CookieJar()
        let chain = try await Self.chain(kind, CookieMiddleware(jar: jar))
        _ = try await chain.load(try Self.set("prefs=a,b=c; Path=/api/echo; HttpOnly", "when=1; Expires=Wed, 21 Oct 2099 07:28:00 GMT; Path=/"))
        let prefs = try #require(jar.all.first { $0.name == "prefs" }, "\(jar.all)")
        #expect(prefs.value == "a,b=c" && prefs.path == "/api/echo" && prefs.httpOnly, "\(prefs)")
        #expect(jar.all.first { $0.name == "when" }?.expires != nil)
        #expect(jar.all.count == 2)
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
