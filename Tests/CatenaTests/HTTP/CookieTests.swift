@testable import Catena
import CatenaTesting
import Foundation
import HTTPTypes
import Testing
import CatenaDemoServer

/// A clock tests move by hand.
final class TestDate: Sendable {
    private let date = Locked(Date(timeIntervalSince1970: 1_800_000_000))
    var now: Date { date.withLock { $0 } }
    func advance(_ seconds: TimeInterval) { date.withLock { $0 += seconds } }
}

@Suite("Cookie jar (RFC 6265)")
struct CookieJarTests {
    let clock = TestDate()
    var jar: CookieJar { CookieJar(now: { [clock] in clock.now }) }

    /// Stores `setCookies` as the answer to a GET of `url`.
    func store(_ jar: CookieJar, _ url: String, _ setCookies: String...) {
        var fields = HTTPFields()
        for value in setCookies { fields.append(HTTPField(name: .setCookie, value: value)) }
        jar.store(APIResponse(status: .ok, headerFields: fields, request: APIRequest(.get, url: URL(string: url)!)))
    }

    func field(_ jar: CookieJar, _ url: String) -> String? {
        jar.cookieField(for: APIRequest(.get, url: URL(string: url)!))
    }

    @Test("host-only by default; Domain reaches subdomains; another site never")
    func domains() {
        let jar = jar
        store(jar, "https://api.example.com/login", "host=1", "wide=2; Domain=.example.com")
        #expect(field(jar, "https://api.example.com/x") == "host=1; wide=2")
        #expect(field(jar, "https://www.example.com/x") == "wide=2")
        #expect(field(jar, "https://example.com/x") == "wide=2")
        #expect(field(jar, "https://example.org/x") == nil)
        #expect(field(jar, "https://badexample.com/x") == nil)
        // A Domain the host is not in, and a public suffix, are refused.
        store(jar, "https://api.example.com/", "evil=1; Domain=other.com", "tld=1; Domain=com", "uk=1; Domain=co.uk")
        #expect(jar.all.map(\.name) == ["host", "wide"])
        store(jar, "https://shop.co.uk/", "suffix=1; Domain=co.uk")
        #expect(field(jar, "https://other.co.uk/") == nil)
        // A trailing dot neither widens a Domain nor splits a host from itself.
        store(jar, "https://x.com./", "dot=1; Domain=com.")
        #expect(field(jar, "https://y.com./") == nil)
        #expect(field(jar, "https://API.Example.com./x") == "host=1; wide=2")
        // An IP address never domain-matches a parent.
        store(jar, "http://127.0.0.1/", "ip=1; Domain=0.0.1")
        #expect(field(jar, "http://127.0.0.1/") == nil)
    }

    @Test("Path: the default is the request's directory; a cookie goes to its path and below, longest first")
    func paths() {
        let jar = jar
        store(jar, "https://a.test/api/users/2", "dir=1", "root=2; Path=/", "docs=3; Path=/docs")
        #expect(jar.all.first { $0.name == "dir" }?.path == "/api/users")
        #expect(field(jar, "https://a.test/api/users/3") == "dir=1; root=2")
        #expect(field(jar, "https://a.test/api/usersX") == "root=2")
        #expect(field(jar, "https://a.test/docs/a") == "docs=3; root=2")
        #expect(field(jar, "https://a.test/") == "root=2")
    }

    @Test("Secure cookies: set over HTTPS only, and sent over HTTPS only")
    func secure() {
        let jar = jar
        store(jar, "http://a.test/", "plain=1; Secure")
        #expect(jar.all.isEmpty)
        store(jar, "https://a.test/", "s=1; Secure; HttpOnly")
        #expect(jar.all.first?.httpOnly == true)
        #expect(field(jar, "https://a.test/") == "s=1")
        #expect(field(jar, "http://a.test/") == nil)
    }

    @Test("Max-Age wins over Expires; zero or past deletes; a later Set-Cookie replaces, keeping its place")
    func expiry() {
        let jar = jar
        store(
            jar, "https://a.test/", "short=1; Max-Age=60; Expires=Wed, 01 Jan 2098 00:00:00 GMT",
            "dated=1; Expires=Wed, 21-Oct-2099 07:28:00 GMT", "session=1")
        #expect(jar.all.count == 3)
        clock.advance(61)
        #expect(field(jar, "https://a.test/") == "dated=1; session=1")
        store(jar, "https://a.test/", "dated=; Max-Age=0")
        #expect(jar.all.map(\.name) == ["session"])
        store(jar, "https://a.test/", "first=1")
        store(jar, "https://a.test/", "session=2")
        #expect(field(jar, "https://a.test/") == "session=2; first=1")
        store(jar, "https://a.test/", "first=; Expires=Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(jar.all.map(\.name) == ["session"])
        jar.removeAll()
        #expect(jar.all.isEmpty)
    }

    @Test("bounded: 50 per domain and 4,096 bytes per cookie; a huge Max-Age is capped, not trapped")
    func limits() {
        let jar = jar
        for index in 0..<60 { store(jar, "https://a.test/", "c\(index)=v") }
        #expect(jar.all.count == CookieJar.perDomainLimit)
        #expect(jar.all.first?.name == "c10")
        store(jar, "https://b.test/", "big=" + String(repeating: "x", count: 5000))
        #expect(field(jar, "https://b.test/") == nil)
        store(jar, "https://b.test/", "long=1; Max-Age=99999999999999999999999")
        let expires = jar.all.first { $0.name == "long" }?.expires
        #expect(expires == clock.now.addingTimeInterval(400 * 86_400))
    }

    @Test(
        "what RFC 6265 says to ignore is ignored",
        arguments: [
            "novalue", "=value", "  =x", "a\u{1}b=c", "", ";", "name=value\u{7F}", "n=" + String(repeating: "v", count: 4096),
        ])
    func ignored(setCookie: String) {
        // Read directly: HTTPFields would already have replaced the control characters.
        #expect(SetCookie(setCookie) == nil)
    }

    @Test("random Set-Cookie fields never trap, and what is stored goes only where it may")
    func fuzz() {
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
        let pieces = [
            "=", ";", " ", "Domain=", "Path=", "/", ".", "example.com", "a.example.com", "com", "co.uk", "Secure",
            "HttpOnly", "Max-Age=", "-", "0", "99999999999999999999", "Expires=", "Wed, 21 Oct 2099 07:28:00 GMT", "\u{1}", "é",
        ]
        let jar = jar
        for _ in 0..<3_000 {
            let setCookie = randomHeaderText(&generator, pieces: pieces, maxPieces: 12)
            let scheme = Bool.random(using: &generator) ? "https" : "http"
            store(jar, "\(scheme)://a.example.com/p/q", setCookie)
        }
        for cookie in jar.all {
            #expect(["a.example.com", "example.com"].contains(cookie.domain), "seed \(seed): \(cookie)")
            #expect(cookie.path.hasPrefix("/"), "seed \(seed)")
        }
        #expect(field(jar, "https://other.com/") == nil, "seed \(seed)")
        #expect(jar.all.count <= CookieJar.perDomainLimit * 2, "seed \(seed)")
    }
}

@Suite("Set-Cookie fields URLSession joined with commas")
struct JoinedSetCookieTests {
    @Test("split where a cookie name follows the comma; an Expires date's comma stays")
    func examples() {
        #expect(
            URLSessionTransport.splitJoinedSetCookie("a=1; Path=/, b=2; Expires=Wed, 21 Oct 2099 07:28:00 GMT, c=3")
                == ["a=1; Path=/", "b=2; Expires=Wed, 21 Oct 2099 07:28:00 GMT", "c=3"])
        #expect(URLSessionTransport.splitJoinedSetCookie("only=1") == ["only=1"])
        #expect(URLSessionTransport.splitJoinedSetCookie(",,, ,") == [",,, ,"])
    }

    @Test("random cookies joined with \", \" come apart as they were, whatever their Expires")
    func roundTrip() {
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
        let attributes = [
            "Path=/", "Secure", "HttpOnly", "Max-Age=60", "Expires=Wed, 21 Oct 2099 07:28:00 GMT",
            "Expires=Sunday, 06-Nov-94 08:49:37 GMT", "Domain=example.com", "SameSite=Lax",
        ]
        for _ in 0..<1_000 {
            let cookies = (0..<Int.random(in: 1...5, using: &generator)).map { index in
                (["n\(index)=v\(Int.random(in: 0...99, using: &generator))"]
                    + (0..<Int.random(in: 0...3, using: &generator)).map { _ in attributes.randomElement(using: &generator)! })
                    .joined(separator: "; ")
            }
            #expect(URLSessionTransport.splitJoinedSetCookie(cookies.joined(separator: ", ")) == cookies, "seed \(seed)")
        }
    }
}
