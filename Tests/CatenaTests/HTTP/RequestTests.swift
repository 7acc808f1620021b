import Catena
import CatenaTesting
import Foundation
import HTTPTypes
import Testing
import CatenaDemoServer

@Suite("APIRequest: URL parts, encoding, validation")
struct RequestTests {
    @Test("each path component is percent-encoded on its own")
    func pathComponentsAreEncodedOneByOne() throws {
        let request = try APIRequest(.get, path: ["api", "users", "a b/c?d#e", "ünï", "x+y@z:1"])
        #expect(request.percentEncodedPath == "/api/users/a%20b%2Fc%3Fd%23e/%C3%BCn%C3%AF/x+y@z:1")
    }

    @Test("';' is encoded, so '..;' cannot reach a server that reads path parameters as '..'")
    func semicolonIsEncoded() throws {
        let request = try APIRequest(.get, path: ["api", "..;", "admin;x=1"])
        #expect(request.percentEncodedPath == "/api/..%3B/admin%3Bx=1")
    }

    @Test("empty, '.' and '..' components are rejected with an error that names them", arguments: ["", ".", ".."])
    func dotComponentsAreRejected(component: String) {
        let error = #expect(throws: CatenaError.self) {
            try APIRequest(.get, path: ["api", component, "x"])
        }
        #expect(error?.code == .invalidRequest)
        #expect(error?.description.contains("path component \"\(component)\"") == true)
    }

    @Test("query names and values are encoded so they cannot change the query's shape")
    func queryItemsAreEncoded() throws {
        var request = try APIRequest(
            .get, baseURL: URL(string: "http://example.com")!, path: ["search"],
            query: [URLQueryItem(name: "q", value: "a+b&c=d e/?"), URLQueryItem(name: "flag", value: nil)])
        #expect(try request.urlString() == "http://example.com/search?q=a%2Bb%26c%3Dd%20e%2F%3F&flag")
        #expect(request.queryItems == [URLQueryItem(name: "q", value: "a+b&c=d e/?"), URLQueryItem(name: "flag", value: nil)])
        request.appendQueryItems([URLQueryItem(name: "page", value: "2")])
        #expect(request.hasQueryItem(named: "page"))
        #expect(try request.urlString().hasSuffix("&flag&page=2"))
    }

    @Test("a URL's own query is sent exactly as given")
    func urlQueryIsKeptVerbatim() throws {
        let request = APIRequest(url: URL(string: "https://example.com/a%2Fb?q=x+y&z=%41")!)
        #expect(try request.urlString() == "https://example.com/a%2Fb?q=x+y&z=%41")
    }

    @Test("the base URL's path is a prefix")
    func baseURLPathIsPrefix() throws {
        let request = try APIRequest(.get, baseURL: URL(string: "http://127.0.0.1:8080/v2/")!, path: ["users", "1"])
        #expect(try request.urlString() == "http://127.0.0.1:8080/v2/users/1")
    }

    @Test("user information in a URL becomes a Basic header and never appears in the URL or a description")
    func userInfoBecomesAuthorization() throws {
        let request = APIRequest(url: URL(string: "https://alice:s3cret@example.com/private")!)
        #expect(request.headerFields[.authorization] == "Basic " + Data("alice:s3cret".utf8).base64EncodedString())
        #expect(try request.urlString() == "https://example.com/private")
        #expect(!request.description.contains("s3cret"))
    }

    @Test("an IPv6 host is bracketed")
    func ipv6Host() throws {
        var request = try APIRequest(.get, path: ["x"])
        request.scheme = "http"
        request.host = "::1"
        request.port = 8080
        #expect(try request.urlString() == "http://[::1]:8080/x")
    }

    @Test("an IPv6 URL round-trips")
    func ipv6URL() throws {
        let request = APIRequest(url: URL(string: "http://[::1]:8080/api/users?page=1")!)
        #expect(request.host == "::1")
        #expect(try request.urlString() == "http://[::1]:8080/api/users?page=1")
    }

    @Test("a relative request has no URL until an environment completes it")
    func relativeRequestNeedsHost() throws {
        let request = try APIRequest(.get, path: ["api", "users"])
        let error = #expect(throws: CatenaError.self) { try request.urlString() }
        #expect(error?.code == .invalidRequest)
        #expect(error?.detail?.contains("no host") == true)
        #expect(error?.description.hasPrefix("GET /api/users") == true)
    }

    @Test("bad URL text, schemes, hosts and ports give errors that say which part is wrong")
    func invalidURLParts() throws {
        let notAURL = #expect(throws: CatenaError.self) { try APIRequest(.get, urlString: "http://exa mple.com/") }
        #expect(notAURL?.code == .invalidRequest)

        let ftp = #expect(throws: CatenaError.self) { try APIRequest(.get, urlString: "ftp://example.com/file") }
        #expect(ftp?.detail?.contains("scheme \"ftp\"") == true)

        let noHost = #expect(throws: CatenaError.self) { try APIRequest(.get, urlString: "/just/a/path") }
        #expect(noHost?.detail?.contains("no host") == true)

        var badHost = try APIRequest(.get, urlString: "http://example.com/")
        badHost.host = "evil.com/x?"
        let hostError = #expect(throws: CatenaError.self) { try badHost.urlString() }
        #expect(hostError?.detail?.contains("host \"evil.com/x?\"") == true)

        var badPort = try APIRequest(.get, urlString: "http://example.com/")
        badPort.port = 70000
        let portError = #expect(throws: CatenaError.self) { try badPort.urlString() }
        #expect(portError?.detail?.contains("port 70000") == true)
    }

    @Test("hosts of random characters: valid exactly when a scalar-by-scalar rule says so, and then sent as they are", arguments: 0..<3)
    func randomHosts(round: Int) throws {
        // The rule, spelled out slowly: an IPv6 address is ASCII hex digits, ":" and ".";
        // a name has no whitespace (Unicode's included), no control and no URL delimiter.
        func valid(_ host: String) -> Bool {
            guard !host.isEmpty else { return false }
            if host.unicodeScalars.contains(":") { return host.unicodeScalars.allSatisfy { "0123456789abcdefABCDEF:.".unicodeScalars.contains($0) } }
            return host.unicodeScalars.allSatisfy {
                !$0.properties.isWhitespace && $0.value > 0x20 && $0.value != 0x7F && !"/?#@\\<>\"{}|^`%[]:".unicodeScalars.contains($0)
            }
        }
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
        let pieces = [
            "a", "Z", "0", "f", "F", "g", ".", "-", ":", "::1", "example.com", " ", "\t", "\u{0}", "\u{7F}", "/", "?", "#", "@", "%", "[", "]",
            "\\", "ü", "中", "\u{A0}", "\u{2003}", "\u{3000}", "\u{85}", "\u{FF11}", "e\u{301}", "😀",
        ]
        var base = try APIRequest(.get, urlString: "http://example.com/x")
        var accepted = 0
        for _ in 0..<2000 {
            let host = (0..<Int(generator.next() % 6)).map { _ in pieces[Int(generator.next() % UInt64(pieces.count))] }.joined()
            base.host = host
            let url = try? base.urlString()
            #expect((url != nil) == valid(host), "seed \(seed): host \(host.unicodeScalars.map { String($0.value, radix: 16) })")
            if let url {
                accepted += 1
                let authority = host.contains(":" as Character) ? "[\(host)]" : host
                #expect(url == "http://\(authority)/x", "seed \(seed)")
            }
        }
        #expect(accepted > 100, "seed \(seed): only \(accepted) valid hosts drawn")
    }

    @Test("secret query values are redacted in descriptions")
    func descriptionRedactsSecrets() throws {
        let request = try APIRequest(.get, urlString: "https://api.example.com/photos?api_key=ABC123&page=2&Token=XYZ")
        #expect(request.description == "GET https://api.example.com/photos?api_key=<redacted>&page=2&Token=<redacted>")
        let error = CatenaError(.timedOut, request: request)
        #expect(!error.description.contains("ABC123"))
        #expect(!error.description.contains("XYZ"))
    }

    @Test("an unparseable URL with credentials is redacted in the error")
    func unparseableURLIsRedacted() {
        let error = #expect(throws: CatenaError.self) {
            try APIRequest(.get, urlString: "http://bob:hunter2@exa mple.com/?token=abc def")
        }
        #expect(error?.description.contains("hunter2") == false)
        #expect(error?.description.contains("abc") == false)
    }
}

@Suite("Request options")
struct OptionTests {
    enum TraceID: RequestOption {
        static let defaultValue: String? = nil
    }

    enum Attempts: RequestOption {
        static let defaultValue = 3
    }

    @Test("options read their default until set, and can be removed again")
    func optionsDefaultSetRemove() throws {
        var request = try APIRequest(.get, path: ["x"])
        #expect(request[option: TraceID.self] == nil)
        #expect(request[option: Attempts.self] == 3)
        #expect(!request.options.contains(Attempts.self))
        request[option: TraceID.self] = "abc"
        request[option: Attempts.self] = 5
        #expect(request[option: TraceID.self] == "abc")
        #expect(request[option: Attempts.self] == 5)
        #expect(request.options.contains(Attempts.self))
        request.options.remove(Attempts.self)
        #expect(request[option: Attempts.self] == 3)
        request.timeout = .milliseconds(250)
        #expect(request[option: RequestTimeout.self] == .milliseconds(250))
    }
}

@Suite("APIRequest from an origin and an encoded path (the OpenAPI bridge)")
struct OriginRequestTests {
    @Test("the origin's path is a prefix; the path and query are kept as given; a fragment is dropped")
    func examples() throws {
        let prefixed = APIRequest(
            .get, origin: URL(string: "https://api.example.com/v1/")!, percentEncodedPathAndQuery: "/users/a%20b?page=2&x=%26#top", headerFields: [:])
        #expect(try prefixed.urlString() == "https://api.example.com/v1/users/a%20b?page=2&x=%26")
        let bare = APIRequest(.delete, origin: URL(string: "http://[::1]:8080")!, percentEncodedPathAndQuery: "items", headerFields: [:])
        #expect(try bare.urlString() == "http://[::1]:8080/items")
        #expect(bare.host == "::1")
        #expect(bare.method == .delete)
    }

    @Test("random encoded paths and queries come out exactly as they went in, and never trap")
    func roundTrip() throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
        let alphabet = Array("abcXYZ019-._~!$&'()*+,;=:@/%20%2F?=&")
        for _ in 0..<2_000 {
            let path =
                "/" + String((0..<Int.random(in: 0...30, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! }.filter { $0 != "?" })
            let query = String((0..<Int.random(in: 0...30, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! })
            let pathAndQuery = path + (query.isEmpty ? "" : "?" + query)
            let request = APIRequest(.get, origin: URL(string: "http://127.0.0.1:9")!, percentEncodedPathAndQuery: pathAndQuery, headerFields: [:])
            let expectedQuery = query.split(separator: "&", omittingEmptySubsequences: true).joined(separator: "&")
            #expect(try request.urlString() == "http://127.0.0.1:9" + path + (expectedQuery.isEmpty ? "" : "?" + expectedQuery), "seed \(seed)")
        }
    }
}
