import Catena
import CatenaDemoServer
import Foundation
import Testing
@testable import CatenaTestSupport

/// `catena login`, `--auth` and `catena logout` as a user runs them, against the demo
/// server's authorization server, with the tokens in a configuration folder of the test's own.
@Suite(
    "catena login, --auth and logout", .serialized,
    .enabled(if: !Timing.isThreadSanitized, "the command runs in child processes; see RequestCommandTests"))
struct LoginCommandTests {
    @Test("login --device keeps the token; --auth uses it, refreshes and keeps the rotated one; logout revokes it", arguments: ["ahc", "urlsession"])
    func signInUseSignOut(transport: String) async throws {
        let base = try await TestServer.running().baseURL
        let config = FileManager.default.temporaryDirectory.appending(path: "catena-config-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: config) }
        let environment = ["XDG_CONFIG_HOME": config.path, "CATENA_TOKEN_STORAGE": "file"]
        let tokenFile = config.appending(path: "catena/tokens/work.json")
        func stored() throws -> BearerToken { try JSONDecoder().decode(BearerToken.self, from: Data(contentsOf: tokenFile)) }

        let login = try await CatenaCommandLine.run(
            ["login", "work", "--issuer", base.absoluteString, "--client-id", "catena-cli", "--device", "--transport", transport], environment: environment)
        #expect(login.status == 0, "\(login.errors)")
        #expect(login.text.contains("enter") && login.text.contains("Signed in"), "\(login.text)")
        let first = try stored()
        let firstRefresh = try #require(first.refreshToken)
        #expect(!login.text.contains(first.accessToken) && !login.text.contains(firstRefresh))
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: tokenFile.path)[.posixPermissions] as? Int)
        #expect(mode == 0o600)

        let me = base.appending(path: "api/protected/me").absoluteString
        let call = try await CatenaCommandLine.run(["get", me, "--auth", "work", "--transport", transport], environment: environment)
        #expect(call.status == 0, "\(call.errors)")
        #expect(call.text.contains("janet.weaver@reqres.in"))

        // Offline, with the saved token expired: answered from the cache under that token's
        // identity, and never refreshed (a refresh would go to the network).
        let cache = config.appending(path: "cache").path
        let shared = base.appending(path: "api/cache/\(UUID().uuidString)").absoluteString + "?max_age=60&public=1"
        let online = try await CatenaCommandLine.run(["get", shared, "--auth", "work", "--cache", cache, "--transport", transport], environment: environment)
        #expect(online.status == 0, "\(online.errors)")
        var expired = first
        expired.expiresAt = Date() - 60
        try FileTokenStorage(directory: tokenFile.deletingLastPathComponent()).save(expired, named: "work")
        let offline = try await CatenaCommandLine.run(
            ["get", shared, "--auth", "work", "--cache", cache, "--offline", "-v", "--transport", transport], environment: environment)
        #expect(offline.status == 0 && offline.output == online.output, "\(offline.errors)")
        #expect(!offline.errors.contains("/oauth/token") && offline.errors.contains("* cache: hit"), "\(offline.errors)")
        #expect(try stored().refreshToken == first.refreshToken, "not refreshed")

        // Expired at the server: the command refreshes, and keeps the rotated refresh token.
        _ = try await TransportKind.asyncHTTPClient.make().load(
            APIRequest(.post, url: base.appending(path: "oauth/expire"), body: .form([(name: "token", value: first.accessToken)])))
        let refreshed = try await CatenaCommandLine.run(["get", me, "--auth", "work", "-v", "--transport", transport], environment: environment)
        #expect(refreshed.status == 0, "\(refreshed.errors)")
        let second = try stored()
        #expect(second.refreshToken != first.refreshToken)
        #expect(refreshed.errors.contains("/oauth/token"), "the refresh is logged")
        for secret in [first.accessToken, second.accessToken, first.refreshToken, second.refreshToken].compactMap({ $0 }) {
            #expect(!refreshed.errors.contains(secret) && !refreshed.text.contains(secret), "no token in the log")
        }

        let logout = try await CatenaCommandLine.run(["logout", "work", "--transport", transport], environment: environment)
        #expect(logout.status == 0, "\(logout.errors)")
        #expect(logout.text.contains("revoked"), "\(logout.text)")
        #expect(!FileManager.default.fileExists(atPath: tokenFile.path))
        let revoked = try await TransportKind.asyncHTTPClient.make().load(
            APIRequest(url: base.appending(path: "api/protected/me"), headerFields: [.authorization: "Bearer \(second.accessToken)"]))
        #expect(revoked.status == .unauthorized)

        let after = try await CatenaCommandLine.run(["get", me, "--auth", "work", "--transport", transport], environment: environment)
        #expect(after.status != 0)
        #expect(after.errors.contains("catena login work"), "\(after.errors)")
    }

    @Test(
        "against an OpenID provider (Glewlwyd): login --device in one command; --auth sends the token only where the login named",
        .enabled(if: OpenIDProvider.testsRun, "apt-get install glewlwyd sqlite3 jq (.ci/run does)"))
    func openIDProvider() async throws {
        let provider = try await OpenIDProvider.running()
        let api = try await TestServer.running().baseURL
        let config = FileManager.default.temporaryDirectory.appending(path: "catena-config-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: config) }
        let environment = ["XDG_CONFIG_HOME": config.path, "CATENA_TOKEN_STORAGE": "file"]
        let login = try await CatenaCommandLine.run(
            [
                "login", "work", "--issuer", provider.issuer.absoluteString, "--client-id", OpenIDProvider.publicClient, "--device", "--scope", "openid",
                "--scope", "catena", "--scope", "offline_access", "--resource", api.absoluteString,
            ], environment: environment
        ) { printed in
            // Alice enters the code the command shows, at the provider's page.
            var code: String?
            _ = await Timing.eventually(within: .seconds(20)) {
                code = printed().split(separator: "\n").first { $0.hasPrefix("and enter") }.map {
                    String($0.dropFirst("and enter".count)).trimmingCharacters(in: .whitespaces)
                }
                return code != nil
            }
            try await provider.approve(userCode: try #require(code, "no code shown: \(printed())"))
        }
        #expect(login.status == 0, "\(login.errors)")
        #expect(login.text.contains("Signed in") && login.text.contains("127.0.0.1:\(api.port ?? 0)"), "\(login.text)")

        // The resource named at login gets the token.
        let echo = api.appending(path: "api/echo").absoluteString
        let call = try await CatenaCommandLine.run(["get", echo, "--auth", "work"], environment: environment)
        #expect(call.status == 0, "\(call.errors)")
        #expect(call.text.contains("Bearer "), "the token went to the resource")

        // Another origin (the same server by another name) is refused, naming the way to allow it.
        let other = "http://localhost:\(api.port ?? 0)/api/echo"
        let refused = try await CatenaCommandLine.run(["get", other, "--auth", "work"], environment: environment)
        #expect(refused.status != 0)
        #expect(refused.errors.contains("--auth-origin"), "\(refused.errors)")
        #expect(!refused.text.contains("Bearer "))
        let named = try await CatenaCommandLine.run(["get", other, "--auth", "work", "--auth-origin", "localhost:\(api.port ?? 0)"], environment: environment)
        #expect(named.status == 0 && named.text.contains("Bearer "), "\(named.errors)")

        // The provider refuses a public client's revocation: the token is forgotten here all the same.
        let logout = try await CatenaCommandLine.run(["logout", "work"], environment: environment)
        #expect(logout.status == 0, "\(logout.errors)")
        #expect(logout.text.contains("stays valid there until it expires"), "\(logout.text)")
        #expect(!FileManager.default.fileExists(atPath: config.appending(path: "catena/tokens/work.json").path))
    }

    @Test("`catena login demo --device` and `--pkce` sign in to the embedded demo server in one command")
    func demo() async throws {
        let config = FileManager.default.temporaryDirectory.appending(path: "catena-config-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: config) }
        for flow in ["--device", "--pkce"] {
            let outcome = try await CatenaCommandLine.run(
                ["login", "demo", flow], environment: ["XDG_CONFIG_HOME": config.path, "CATENA_TOKEN_STORAGE": "file"])
            #expect(outcome.status == 0, "\(outcome.errors)")
            #expect(outcome.text.contains("GET /api/protected/me with it: 200"), "\(outcome.text)")
        }
        let bad = try await CatenaCommandLine.run(["login", "../evil"], environment: ["XDG_CONFIG_HOME": config.path])
        #expect(bad.status == 64, "a name that would climb out of the folder is refused: \(bad.errors)")
    }
}
