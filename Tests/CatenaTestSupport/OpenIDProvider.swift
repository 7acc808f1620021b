import Catena
import CatenaAsyncHTTPClient
import Foundation
import HTTPTypes
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Glewlwyd, an OpenID Connect provider from Debian's packages, on loopback: an
/// authorization server the project did not write, whose ways differ from the demo
/// server's (OpenID discovery only, `nonce` required with `openid`, redirect URIs
/// compared exactly, empty error bodies, a public client's revocation refused with 401,
/// `token_type` in lower case). `scripts/glewlwyd.sh` prepares and registers it.
///
/// Clients: `catena-confidential` (secret `catena-secret`, client credentials, scope
/// `catena`) and `catena-public` (code + PKCE, refresh with rotation, device grant, its
/// one redirect URI `redirectURI`). The user `alice` approves what she is asked.
final class OpenIDProvider: Sendable {
    let issuer: URL
    let base: URL
    /// `http://127.0.0.1:PORT/callback`, the public client's one redirect URI.
    let redirectURI: URL
    let redirectPort: UInt16
    private let pid: pid_t
    private let directory: URL

    static let confidentialClient = "catena-confidential"
    static let confidentialSecret = "catena-secret"
    static let publicClient = "catena-public"

    /// Whether glewlwyd is installed; under CI it must be (`.ci/run` installs it).
    static let isInstalled = LocalProcess.executable("glewlwyd") != nil
    static let testsRun = isInstalled || ProcessInfo.processInfo.environment["CI"] != nil

    private init(issuer: URL, base: URL, redirectPort: UInt16, pid: pid_t, directory: URL) {
        self.issuer = issuer
        self.base = base
        self.redirectPort = redirectPort
        self.redirectURI = URL(string: "http://127.0.0.1:\(redirectPort)/callback")!
        self.pid = pid
        self.directory = directory
    }

    /// One provider for the whole test process, started on first use (about 3 s) and
    /// killed when the process exits: starting one per test loaded the machine enough to
    /// make unrelated timing tests late.
    static func running() async throws -> OpenIDProvider {
        try await shared.value
    }

    private static let shared = Task { () throws -> OpenIDProvider in
        let provider = try await start()
        sharedPID.withLock { $0 = provider.pid }
        atexit { if let pid = OpenIDProvider.sharedPID.withLock({ $0 }) { kill(pid, SIGKILL) } }
        return provider
    }

    private static let sharedPID = Locked<pid_t?>(nil)

    /// A provider of its own, on free ports; `stop()` it when done.
    static func start() async throws -> OpenIDProvider {
        guard let program = LocalProcess.executable("glewlwyd") else {
            throw LocalProcessError("glewlwyd is not installed: apt-get install glewlwyd sqlite3 jq (.ci/run does)")
        }
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appending(path: "scripts/glewlwyd.sh").path
        var lastError: (any Error)?
        // A port picked free can be taken before the server binds it: try a few.
        for _ in 0..<3 {
            let port = try LocalProcess.freePort()
            let redirectPort = UInt16(try LocalProcess.freePort())
            let directory = FileManager.default.temporaryDirectory.appending(path: "catena-glewlwyd-\(UUID().uuidString)")
            _ = try await run(script, ["prepare", directory.path, "\(port)"])
            let pid = try LocalProcess.spawn(program, ["-c", directory.appending(path: "glewlwyd.conf").path])
            do {
                let output = try await run(script, ["configure", directory.path, "\(port)", "http://127.0.0.1:\(redirectPort)/callback"])
                guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix("ISSUER=") }), let issuer = URL(string: String(line.dropFirst(7)))
                else { throw LocalProcessError("glewlwyd.sh printed no issuer: \(output)") }
                return OpenIDProvider(
                    issuer: issuer, base: URL(string: "http://127.0.0.1:\(port)")!, redirectPort: redirectPort, pid: pid, directory: directory)
            } catch {
                lastError = error
                kill(pid, SIGKILL)
                var status: Int32 = 0
                waitpid(pid, &status, 0)
                try? FileManager.default.removeItem(at: directory)
            }
        }
        throw lastError ?? LocalProcessError("glewlwyd did not start")
    }

    /// Ends the server and reaps it.
    func stop() {
        kill(pid, SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        try? FileManager.default.removeItem(at: directory)
    }

    /// Runs `script` with bash, waiting for its end without holding a thread of the
    /// cooperative pool; its standard output when it succeeds.
    private static func run(_ script: String, _ arguments: [String]) async throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [script] + arguments
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do {
                try process.run()
            } catch {
                process.terminationHandler = nil
                continuation.resume(throwing: error)
            }
        }
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        guard status == 0 else {
            let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            throw LocalProcessError("glewlwyd.sh \(arguments.first ?? "") failed (\(status)): \(message)")
        }
        return text
    }

    // MARK: Alice, at her browser

    /// Alice's browser: cookies kept, redirects not followed.
    private func browser() async throws -> any HTTPLoader {
        let chain = CookieMiddleware() --> AsyncHTTPClientTransport.forTests(timeout: .seconds(30))
        var login = APIRequest(
            .post, url: base.appending(path: "api/auth"), body: .json(["username": "alice", "password": "alice-password"]))
        login[option: RedirectPolicy.self] = .never
        let answer = try await chain.load(login)
        guard answer.status == .ok else { throw LocalProcessError("alice could not sign in: \(answer.status)") }
        // Consent to the public client's scopes, once (a space-separated list).
        var grant = APIRequest(
            .put, url: base.appending(path: "api/auth/grant/\(Self.publicClient)"), body: .json(["scope": "openid catena offline_access"]))
        grant[option: RedirectPolicy.self] = .never
        let granted = try await chain.load(grant)
        guard granted.status == .ok else { throw LocalProcessError("alice could not grant the scopes: \(granted.status)") }
        return chain
    }

    /// Approves an authorization request as Alice and follows the provider's redirect to
    /// the client's listener, as her browser would; returns the redirect's URL.
    @discardableResult
    func approve(authorization url: URL) async throws -> URL {
        let browser = try await browser()
        // `g_continue` tells the provider the user has seen the consent page.
        var components = try #require(URLComponents(url: url, resolvingAgainstBaseURL: false))
        components.percentEncodedQuery = (components.percentEncodedQuery ?? "") + "&g_continue="
        var authorize = APIRequest(url: try #require(components.url))
        authorize[option: RedirectPolicy.self] = .never
        let answer = try await browser.load(authorize)
        guard answer.status.code == 302, let location = answer.headerFields[.location], let redirect = URL(string: location) else {
            throw LocalProcessError("the provider did not redirect: \(answer.status) \(answer.headerFields[.location] ?? "")")
        }
        if redirect.host == "127.0.0.1", redirect.port == Int(redirectPort) {
            _ = try? await AsyncHTTPClientTransport.forTests(timeout: .seconds(10)).load(APIRequest(url: redirect))
        }
        return redirect
    }

    /// Enters `userCode` as Alice at the provider's device page.
    func approve(userCode: String) async throws {
        let browser = try await browser()
        var components = try #require(URLComponents(url: issuer.appending(path: "device"), resolvingAgainstBaseURL: false))
        components.queryItems = [URLQueryItem(name: "code", value: userCode), URLQueryItem(name: "g_continue", value: "")]
        var request = APIRequest(url: try #require(components.url))
        request[option: RedirectPolicy.self] = .never
        let answer = try await browser.load(request)
        // Approved: a redirect to its page saying so.
        guard answer.status.code == 302, answer.headerFields[.location]?.contains("deviceComplete") == true else {
            throw LocalProcessError("the device code was not approved: \(answer.status) \(answer.headerFields[.location] ?? "")")
        }
    }
}
