@testable import Catena
import CatenaDemoServer
import Foundation
import Testing
@testable import CatenaTestSupport

/// The OAuth pieces that need no server: the PKCE hash, token answers as hostile
/// input, token storage on disk, and tokens that never print.
@Suite("OAuth 2 parts")
struct OAuthPartsTests {
    @Test("the S256 code challenge is RFC 7636's own example (Appendix B)")
    func codeChallenge() {
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
        #expect(OAuth2Client.base64URL(SHA256.hash(verifier.utf8)) == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
    }

    @Test("state and verifier are 43 base64url characters, new each time; equal strings compare equal in constant time")
    func randomness() {
        let values = (0..<100).map { _ in OAuth2Client.randomToken() }
        #expect(Set(values).count == 100)
        #expect(values.allSatisfy { $0.count == 43 && $0.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" } })
        #expect(OAuth2Client.constantTimeEqual("abc", "abc"))
        #expect(!OAuth2Client.constantTimeEqual("abc", "abd"))
        #expect(!OAuth2Client.constantTimeEqual("abc", "abcd"))
    }

    @Test("the metadata URL puts the well-known part before the issuer's path (RFC 8414 §3.1); an http issuer elsewhere than loopback is refused")
    func metadataURL() throws {
        #expect(
            try OAuth2Client.metadataURL(for: URL(string: "https://auth.example.com")!).absoluteString
                == "https://auth.example.com/.well-known/oauth-authorization-server")
        #expect(
            try OAuth2Client.metadataURL(for: URL(string: "https://example.com/tenant/1")!).absoluteString
                == "https://example.com/.well-known/oauth-authorization-server/tenant/1")
        #expect(throws: CatenaError.self) { try OAuth2Client.metadataURL(for: URL(string: "http://auth.example.com")!) }
        #expect(throws: CatenaError.self) { try OAuth2Client.metadataURL(for: URL(string: "https://auth.example.com/?tenant=1")!) }
        #expect(OAuth2Client.isSafe(URL(string: "http://127.0.0.1:8080/token")!))
        #expect(OAuth2Client.isSafe(URL(string: "http://[::1]:8080/token")!))
        #expect(!OAuth2Client.isSafe(URL(string: "http://example.com/token")!))
    }

    static func answer(_ json: String) throws(CatenaError) -> BearerToken {
        let request = APIRequest(.post, url: URL(string: "https://auth.example.com/token")!)
        return try TokenAnswer.token(from: APIResponse(status: .ok, body: Data(json.utf8), request: request), for: request, clock: SystemRetryClock())
    }

    @Test("token answers: lifetimes as numbers or strings, clamped; a token a header cannot carry, or not Bearer, is refused")
    func tokenAnswers() throws {
        let token = try Self.answer(#"{"access_token":"a1","token_type":"bearer","expires_in":"3600","refresh_token":"r1","scope":"read"}"#)
        #expect(token.refreshToken == "r1" && token.scope == "read")
        #expect(abs(try #require(token.expiresAt).timeIntervalSinceNow - 3600) < 5)
        #expect(try Self.answer(#"{"access_token":"a1","expires_in":-5}"#).expiresAt.map { $0.timeIntervalSinceNow <= 0 } == true)
        #expect(try Self.answer(#"{"access_token":"a1","expires_in":1e300}"#).expiresAt.map { $0.timeIntervalSinceNow <= 366 * 86_400 } == true)
        for hostile in [
            #"{"access_token":"a\r\nX-Injected: 1"}"#, #"{"access_token":""}"#, #"{"access_token":"a b"}"#, #"{"access_token":"é"}"#,
            #"{"access_token":"a1","token_type":"DPoP"}"#, #"{"access_token":"a1","refresh_token":"r\n1"}"#, #"{"access_token":5}"#, "[]", "",
        ] {
            #expect(throws: CatenaError.self, "\(hostile)") { try Self.answer(hostile) }
        }
    }

    @Test("random token and error answers never trap; an error answer's description is printable and scrubbed of what was sent")
    func hostileAnswersFuzz() async throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
        let pieces = [
            #"{"#, #"}"#, #"""#, #"access_token"#, #"refresh_token"#, #"expires_in"#, #"error"#, "\u{1B}[2J", "\u{202E}", ":", ",", "1e999", "-1",
            "\"\\u0000\"", "null", "[", "]", "\"Bearer\"", "\r\n",
        ]
        for round in 0..<400 {
            let text = (0..<Int.random(in: 0..<24, using: &generator)).map { _ in pieces[Int.random(in: 0..<pieces.count, using: &generator)] }.joined()
            if let token = try? Self.answer(text) { #expect(TokenAnswer.isTokenText(token.accessToken), "seed \(seed)") }
            if let error = OAuth2Error(answer: Data(text.utf8), secretsOf: APIRequest(url: URL(string: "https://auth.example/token")!)) {
                #expect(!error.description.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x202E }, "seed \(seed)")
            }
            if round % 50 == 0 { await Task.yield() }
        }
        // The form's secret field and the Basic pair's secret (form-encoded, RFC 6749 §2.3.1) are both scrubbed.
        let sent = APIRequest(
            .post, url: URL(string: "https://auth.example/token")!,
            headerFields: [.authorization: "Basic " + Data("app:s%2Fcret+9".utf8).base64EncodedString()],
            body: .form([(name: "grant_type", value: "refresh_token"), (name: "refresh_token", value: "r-SECRET-1")]))
        let echoed = try #require(
            OAuth2Error(
                answer: Data(#"{"error":"invalid_grant","error_description":"refresh token r-SECRET-1 of s/cret 9 \u001b[31mis spent"}"#.utf8),
                secretsOf: sent))
        #expect(echoed.code == .invalidGrant)
        #expect(echoed.description == "invalid_grant: refresh token <redacted> of <redacted>  [31mis spent")
    }

    @Test("a token never prints its secrets: description, interpolation, dump and the debug description")
    func tokenNeverPrints() {
        let token = BearerToken(accessToken: "AT-secret-1", refreshToken: "RT-secret-2", expiresAt: Date(timeIntervalSince1970: 0), scope: "read")
        var dumped = ""
        dump(token, to: &dumped)
        for text in [token.description, "\(token)", String(reflecting: token), dumped, "\([token])"] {
            #expect(!text.contains("AT-secret-1") && !text.contains("RT-secret-2"), "\(text)")
        }
        #expect(token.description.contains("refresh token") && token.description.contains("scope read"))
        #expect(OAuth2Client.Authentication.clientSecretBasic("s3cret").description == "client_secret_basic")
    }

    @Test("file storage: 0600 files in a 0700 directory, atomic replace, names that cannot climb out, and no trust in files others may read")
    func fileStorage() throws {
        let directory = FileManager.default.temporaryDirectory.appending(path: "catena-storage-\(UUID().uuidString)/tokens")
        let storage = FileTokenStorage(directory: directory)
        #expect(try storage.token(named: "demo") == nil)
        let token = BearerToken(accessToken: "a", refreshToken: "r", expiresAt: Date(timeIntervalSince1970: 1_800_000_000), scope: "read")
        try storage.save(token, named: "demo")
        #expect(try storage.token(named: "demo") == token)
        try storage.save(BearerToken(accessToken: "b"), named: "demo")
        #expect(try storage.token(named: "demo")?.accessToken == "b")

        let file = try storage.file(named: "demo").path
        let fileMode = try #require(try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int)
        let directoryMode = try #require(try FileManager.default.attributesOfItem(atPath: directory.path)[.posixPermissions] as? Int)
        #expect(fileMode == 0o600 && directoryMode == 0o700)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["demo.json"], "no temporary file left")

        for name in ["../evil", ".hidden", "", "a/b", String(repeating: "x", count: 65), "tab\t"] {
            #expect(throws: TokenStorageError.self, "\(name)") { try storage.save(token, named: name) }
        }
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: file)
        let readable = #expect(throws: TokenStorageError.self) { try storage.token(named: "demo") }
        #expect(readable?.description.contains("0600") == true)
        try FileManager.default.removeItem(atPath: file)
        try FileManager.default.createSymbolicLink(atPath: file, withDestinationPath: "/etc/hostname")
        #expect(throws: TokenStorageError.self) { try storage.token(named: "demo") }
        try storage.removeToken(named: "demo")
        try storage.removeToken(named: "demo")  // nothing kept is no failure
        #expect(try storage.token(named: "demo") == nil)
    }
}
