import Catena
import CatenaDemoServer
import Foundation
import Testing
@testable import CatenaTestSupport

/// The command's network options, as curl names them: --proxy, --proxy-user, --noproxy
/// and the proxy variables, --pinnedpubkey, --unix-socket. One command at a time, not
/// under ThreadSanitizer (see RequestCommandTests).
@Suite(
    "catena: proxies, public-key pins and Unix sockets", .serialized,
    .enabled(if: !Timing.isThreadSanitized, "the command runs in child processes; see RequestCommandTests"))
struct NetworkOptionsTests {
    private func scratch() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catena-network-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    @Test("--proxy with --proxy-user @FILE tunnels HTTPS; a wrong password fails as a proxy refusal and is never printed", .enabled(if: ProxyProcess.testsRun))
    func proxyOptions() async throws {
        let password = "pw-\(UUID().uuidString)"
        let proxy = try await ProxyProcess.tinyproxy(user: "alice", password: password)
        defer { proxy.stop() }
        let directory = try scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let authority = try TLSServers.authority.get()
        let server = try await DemoServer.start(tls: DemoTLS(certificate: try authority.issue()))
        defer { Task { await server.stop() } }
        let ca = directory.appendingPathComponent("ca.pem"), user = directory.appendingPathComponent("user")
        try authority.certificatePEM.write(to: ca, atomically: true, encoding: .utf8)
        try "alice:\(password)\n".write(to: user, atomically: true, encoding: .utf8)
        let url = server.baseURL.absoluteString + "/api/users/2"
        let through = try await CatenaCommandLine.run(["get", url, "--ca-file", ca.path, "-x", "127.0.0.1:\(proxy.port)", "--proxy-user", "@" + user.path])
        #expect(through.status == 0 && through.text.contains("Janet"), "\(through.errors)")
        #expect(await proxy.eventuallyLogged(port: server.port), "\(proxy.log)")
        let wrong = "wrong-\(UUID().uuidString)"
        let refused = try await CatenaCommandLine.run([
            "get", url, "--ca-file", ca.path, "--proxy", "http://alice:\(wrong)@127.0.0.1:\(proxy.port)", "-v", "--curl",
        ])
        #expect(refused.status == 7 && refused.errors.contains("proxy credentials"), "status \(refused.status): \(refused.errors)")
        #expect(!refused.errors.contains(wrong) && !refused.text.contains(wrong), "the proxy password is never printed")
    }

    @Test(
        "the proxy variables as curl reads them; --noproxy and --proxy \"\" go direct; URLSession follows them through libcurl",
        .enabled(if: ProxyProcess.testsRun))
    func environment() async throws {
        let proxy = try await ProxyProcess.tinyproxy()
        defer { proxy.stop() }
        let server = try await DemoServer.start()
        defer { Task { await server.stop() } }
        let url = server.baseURL.absoluteString + "/api/users/2"
        let variables = ["http_proxy": "http://127.0.0.1:\(proxy.port)"]
        let direct = [["--noproxy", "127.0.0.1"], ["--proxy", ""]]
        for options in direct {
            let outcome = try await CatenaCommandLine.run(["get", url] + options, environment: variables)
            #expect(outcome.status == 0 && outcome.text.contains("Janet"), "\(options): \(outcome.errors)")
        }
        #expect(!proxy.logged(port: server.port), "\(proxy.log)")
        #expect(server.requestsRead == 2)
        let viaEnvironment = try await CatenaCommandLine.run(["get", url], environment: variables)
        #expect(viaEnvironment.status == 0, "\(viaEnvironment.errors)")
        #expect(await proxy.eventuallyLogged(port: server.port), "AsyncHTTPClient took http_proxy: \(proxy.log)")
        // What the URLSession article states: libcurl reads the variables itself, and
        // no proxy option of the command applies to it.
        let second = try await DemoServer.start()
        defer { Task { await second.stop() } }
        let libcurl = try await CatenaCommandLine.run(
            ["get", second.baseURL.absoluteString + "/api/users/2", "--transport", "urlsession"], environment: variables)
        #expect(libcurl.status == 0, "\(libcurl.errors)")
        #expect(await Timing.eventually(within: .seconds(5)) { proxy.log.contains(":\(second.port)/api/users/2") }, "libcurl used http_proxy: \(proxy.log)")
        let refused = try await CatenaCommandLine.run(["get", url, "--transport", "urlsession", "--noproxy", "*"])
        #expect(refused.status == 64 && refused.errors.contains("--noproxy needs --transport ahc"), "\(refused.errors)")
    }

    @Test("--pinnedpubkey: the leaf's key connects, another key fails as untrusted before any request")
    func pinnedPublicKey() async throws {
        let directory = try scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let authority = try TLSServers.authority.get()
        let certificate = try authority.issue()
        let server = try await DemoServer.start(tls: DemoTLS(certificate: certificate))
        defer { Task { await server.stop() } }
        let ca = directory.appendingPathComponent("ca.pem")
        try authority.certificatePEM.write(to: ca, atomically: true, encoding: .utf8)
        let url = server.baseURL.absoluteString + "/api/users/2"
        let stale = "sha256//" + Data(repeating: 1, count: 32).base64EncodedString()
        let good = try await CatenaCommandLine.run(["get", url, "--ca-file", ca.path, "--pinnedpubkey", "\(stale);sha256//\(certificate.publicKeySHA256)"])
        #expect(good.status == 0 && good.text.contains("Janet"), "\(good.errors)")
        let bad = try await CatenaCommandLine.run(["get", url, "--ca-file", ca.path, "--pinnedpubkey", stale])
        #expect(bad.status == 60 && bad.errors.contains("none of its pins"), "status \(bad.status): \(bad.errors)")
        #expect(server.requestsRead == 1)
        let malformed = try await CatenaCommandLine.run(["get", url, "--pinnedpubkey", "key.pem"])
        #expect(malformed.status == 2 && malformed.errors.contains("sha256//"), "\(malformed.errors)")
    }

    @Test("--resolve and --connect-to reach loopback under a name its certificate and pins hold; wrong values are refused by name")
    func resolveAndConnectTo() async throws {
        let directory = try scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let authority = try TLSServers.authority.get()
        let certificate = try authority.issue(for: ["api.example.com"])
        let server = try await DemoServer.start(tls: DemoTLS(certificate: certificate))
        defer { Task { await server.stop() } }
        let ca = directory.appendingPathComponent("ca.pem")
        try authority.certificatePEM.write(to: ca, atomically: true, encoding: .utf8)
        let url = "https://api.example.com:\(server.port)/api/users/2"
        let pin = "sha256//" + certificate.publicKeySHA256
        let resolved = try await CatenaCommandLine.run([
            "get", url, "--ca-file", ca.path, "--pinnedpubkey", pin, "--resolve", "api.example.com:\(server.port):127.0.0.1",
        ])
        #expect(resolved.status == 0 && resolved.text.contains("Janet"), "\(resolved.errors)")
        let connected = try await CatenaCommandLine.run(["get", url, "--ca-file", ca.path, "--connect-to", "api.example.com::127.0.0.1:"])
        #expect(connected.status == 0 && connected.text.contains("Janet"), "\(connected.errors)")
        let wrongPin = "sha256//" + Data(repeating: 1, count: 32).base64EncodedString()
        let untrusted = try await CatenaCommandLine.run([
            "get", url, "--ca-file", ca.path, "--pinnedpubkey", wrongPin, "--resolve", "api.example.com:*:127.0.0.1",
        ])
        #expect(untrusted.status == 60, "\(untrusted.errors)")
        let malformed = try await CatenaCommandLine.run(["get", url, "--resolve", "api.example.com:443:localhost"])
        #expect(malformed.status == 2 && malformed.errors.contains("IP address"), "\(malformed.errors)")
        let moved = try await CatenaCommandLine.run(["get", url, "--connect-to", "api.example.com:\(server.port):127.0.0.1:1"])
        #expect(moved.status != 0 && moved.errors.contains("port"), "\(moved.errors)")
        let session = try await CatenaCommandLine.run(["get", url, "--resolve", "api.example.com:443:127.0.0.1", "--transport", "urlsession"])
        #expect(session.status != 0 && session.errors.contains("--transport ahc"), "\(session.errors)")
    }

    @Test("--unix-socket reaches a server on a socket; the URL names the host")
    func unixSocket() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("catena-cli-\(UUID().uuidString.prefix(8)).sock").path
        let server = try await DemoServer.start(unixSocket: path)
        defer { Task { await server.stop() } }
        let outcome = try await CatenaCommandLine.run(["get", "http://localhost/api/users/2", "--unix-socket", path])
        #expect(outcome.status == 0 && outcome.text.contains("Janet"), "\(outcome.errors)")
        let urlSession = try await CatenaCommandLine.run(["get", "http://localhost/api/users/2", "--unix-socket", path, "--transport", "urlsession"])
        #expect(urlSession.status == 64 && urlSession.errors.contains("--unix-socket needs --transport ahc"), "\(urlSession.errors)")
    }
}
