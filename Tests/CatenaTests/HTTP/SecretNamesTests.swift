@testable import Catena
import CatenaDemoServer
import Foundation
import HTTPTypes
import Testing

@Suite("Secret names and the body scrubber")
struct SecretNamesTests {
    @Test("real APIs' secret names are secret in every casing and separator style; near misses stay readable")
    func names() {
        let secret = [
            "accessToken", "AccessToken", "refresh_token", "IdToken", "idToken", "clientSecret", "client-secret", "api-token", "X-Amz-Signature",
            "X-Amz-Credential", "X-Amz-Security-Token", "X-Goog-Signature", "private_token", "auth_token", "PHPSESSID", "JSESSIONID", "sid",
            "code", "code_verifier", "client_assertion", "Ocp-Apim-Subscription-Key", "x-api-key", "API.KEY", "password_confirmation",
            "newPassword", "Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie", "key", "sig", "SECRET_ACCESS_KEY",
            // Found by review, beyond the first list: endings and words real APIs use.
            "x-functions-key", "DD-APPLICATION-KEY", "app_key", "AccountKey", "X-Sentry-Auth", "sentry_key", "Authentication", "X-Auth",
            "X-Shopify-Hmac-Sha256", "device_code", "user_code", "mfa_code", "passcode", "connect.sid", "user[pass]", "api[key]",
            "access_tokens",
        ]
        for name in secret {
            #expect(Redaction.default.isSecret(name: name), "\(name)")
        }
        for name in [
            "token_type", "max_tokens", "prompt_tokens", "expires_in", "page", "keyword", "monkey", "primaryKey", "Idempotency-Key", "Content-Type",
            "codes", "status_code", "errorCode", "country_code", "User-Agent", "Accept-Encoding", "items[title]",
        ] {
            #expect(!Redaction.default.isSecret(name: name), "\(name)")
        }
        #expect(Redaction.default.isSecretHeader(HTTPField.Name("X-Amz-Security-Token")!))
        #expect(!Redaction.default.isSecretHeader(.contentType))
    }

    @Test("a redaction adds names and words and never hides less than the rule")
    func extending() {
        let custom = Redaction(headerNames: [HTTPField.Name("X-Tenant")!], queryNames: ["Tenant"], words: ["pan"])
        #expect(custom.isSecretHeader(HTTPField.Name("X-Tenant")!))
        #expect(custom.isSecret(name: "tenant") && custom.isSecret(name: "card_PAN_last") && custom.isSecret(name: "accessToken"))
        #expect(!Redaction.default.isSecret(name: "card_pan"))
    }

    @Test("every style of a secret stem is secret (generated)")
    func styles() {
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
        let stems = [["access", "token"], ["client", "secret"], ["x", "amz", "signature"], ["api", "key"], ["session", "id"], ["code", "verifier"]]
        for _ in 0..<500 {
            let stem = stems.randomElement(using: &generator)!
            let separator = ["", "_", "-", ".", " "].randomElement(using: &generator)!
            let name = stem.map { word in
                String(word.map { Bool.random(using: &generator) ? Character($0.uppercased()) : $0 })
            }.joined(separator: separator)
            #expect(Redaction.default.isSecret(name: name), "seed \(seed): \(name)")
            #expect(Redaction.default.isSecret(name: "x_" + name), "seed \(seed): x_\(name)")
        }
    }

    @Test("URLs inside Location, Content-Location, Link and Refresh lose their secret query values")
    func urlHeaders() {
        let redaction = Redaction.default
        let link = HTTPField(
            name: HTTPField.Name("Link")!, value: #"<https://a.example/p?page=2&X-Amz-Signature=SIG1>; rel="next", <https://a.example/p?token=T2>; rel="last""#)
        #expect(
            redaction.printableValue(of: link)
                == #"<https://a.example/p?page=2&X-Amz-Signature=<redacted>>; rel="next", <https://a.example/p?token=<redacted>>; rel="last""#)
        let refresh = HTTPField(name: HTTPField.Name("Refresh")!, value: "5; URL=https://a.example/?accessToken=T3")
        #expect(redaction.printableValue(of: refresh) == "5; URL=https://a.example/?accessToken=<redacted>")
        let location = HTTPField(name: .location, value: "https://user:pw@a.example/x?sig=S&id=1")
        #expect(redaction.printableValue(of: location) == "https://<redacted>@a.example/x?sig=<redacted>&id=1")
        // OAuth's implicit flow answers in the fragment, after a query or not.
        let implicit = HTTPField(name: .location, value: "https://app.example/cb?state=x#access_token=FRAG&token_type=bearer")
        #expect(redaction.printableValue(of: implicit) == "https://app.example/cb?state=x#access_token=<redacted>&token_type=bearer")
        let referer = HTTPField(name: .referer, value: "https://a.example/?api_key=REF")
        #expect(redaction.printableValue(of: referer) == "https://a.example/?api_key=<redacted>")
        #expect(redaction.printableValue(of: HTTPField(name: .setCookie, value: "sid=1")) == Redaction.placeholder)
    }

    @Test("a JSON string that is a URL carrying a secret is replaced whole: absolute, relative, an app's scheme, user info; plain URLs stay")
    func urlsInJSON() {
        let scrubber = BodyScrubber(redaction: .default, limit: 1 << 20)
        let cases: [(String, Bool)] = [
            ("https://as.example/device?user_code=WDJB-MJHT", true), ("/cb?code=SECRET&state=s", true), ("com.example.app:/cb?code=SECRET", true),
            ("postgres://user:pw@db.example/app", true), ("https://app.example/cb#access_token=SECRET", true),
            ("https://as.example/device?lang=en", false), ("a=b, said the note", false), ("ann@example.com", false),
        ]
        for (value, secret) in cases {
            let body = Data(#"{"link": "\#(value)", "n": 1}"#.utf8)
            guard case .text(let text, _) = scrubber.scrub(body: body, contentType: "application/json") else {
                Issue.record("not scrubbed: \(value)")
                continue
            }
            #expect(text.contains(value) == !secret, "\(value): \(text)")
        }
    }

    @Test("JSON under any type, multipart by part name, binary left out, each cookie replaced where echoed")
    func bodies() throws {
        var request = try APIRequest(.post, urlString: "https://a.example/x")
        request.headerFields[.cookie] = "sid=COOKIE-one; theme=COOKIE-two-plain"
        var scrubber = BodyScrubber(redaction: .default, limit: 1 << 20)
        scrubber.learnSecrets(of: request, body: nil)
        let echo = Data(#"{"echo": "sid=COOKIE-one", "headers": {"x": "COOKIE-one"}}"#.utf8)
        guard case .text(let text, true) = scrubber.scrub(body: echo, contentType: "text/plain") else {
            Issue.record("not scrubbed")
            return
        }
        #expect(!text.contains("COOKIE-one") && text.contains(#""echo": "<redacted>""#), "\(text)")
        let api = Data(#"{"data": {"idToken": "T", "name": "N"}}"#.utf8)
        #expect(
            scrubber.scrub(body: api, contentType: "application/vnd.api+json") == .text(#"{"data": {"idToken": "<redacted>", "name": "N"}}"#, redacted: true))
        #expect(
            scrubber.scrub(body: Data(#"{"idToken": "#.utf8), contentType: "application/json") == .omitted("a JSON body that could not be read for secrets"))
        #expect(
            scrubber.scrub(body: Data([0xFF, 0x00, 0x01]), contentType: nil) == .omitted("3 bytes that are not UTF-8 text, which cannot be read for secrets"))
        #expect(
            BodyScrubber(redaction: .default, limit: 8, keepsUnreadable: true).scrub(body: Data([0xFF]), contentType: nil)
                == .binary(Data([0xFF]), redacted: false))
        #expect(scrubber.scrub(body: Data(count: 2 << 20), contentType: nil) == .omitted("over the 1048576-byte limit for a body read for secrets"))

        let form = MultipartForm(
            parts: [
                .init(name: "title", value: "plain title"),
                .init(name: "client_secret", value: "PART-s3cret"),
                .init(name: "photo", filename: "a.bin", contentType: "application/octet-stream", data: Data([0xFF, 0xFE, 0x00])),
                .init(name: "meta", filename: "m.json", contentType: "application/json", data: Data(#"{"accessToken":"PART-token"}"#.utf8)),
            ], boundary: "b0undary")
        let scrubbed = scrubber.scrub(body: form.encoded(), contentType: "multipart/form-data; boundary=b0undary")
        guard case .binary(let bytes, true) = scrubbed else {
            Issue.record("\(scrubbed)")
            return
        }
        let parts = String(decoding: bytes, as: UTF8.self)
        #expect(!parts.contains("PART-s3cret") && !parts.contains("PART-token") && !parts.contains("PART-br0ken"), "\(parts)")
        #expect(parts.contains("plain title"), "\(parts)")
        #expect(bytes.firstRange(of: Data([0xFF, 0xFE, 0x00])) != nil, "a file part with a plain name keeps its bytes")
        #expect(
            scrubber.scrub(body: Data("--x\r\nbroken".utf8), contentType: "multipart/form-data; boundary=x")
                == .omitted("a multipart body that could not be read for secrets"))
    }

    @Test("a Content-Disposition of a million semicolons is read in one pass")
    func dispositionIsLinear() {
        let value = "form-data" + String(repeating: ";", count: 1 << 20) + "; name=\"x\""
        #expect(Multipart.dispositionName(value) == "x")
        #expect(Multipart.dispositionName("form-data; filename=\"a;b\"; NAME=\"c;d\"") == "c;d")
    }

    @Test("the multipart reader never traps or hangs on hostile bytes (generated)")
    func multipartFuzz() {
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
        let pieces = ["--b", "\r\n", "\r\n\r\n", "Content-Disposition: form-data; name=\"", "token", "\"", ";", "--", "x", "\u{0}"]
        for _ in 0..<2_000 {
            let text = (0..<Int.random(in: 0...24, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
            let parts = Multipart.parts(of: Data(text.utf8), boundary: "b")
            for part in parts ?? [] {
                #expect(part.body.lowerBound <= part.body.upperBound && part.body.upperBound <= text.utf8.count, "seed \(seed): \(text.debugDescription)")
            }
        }
    }
}
