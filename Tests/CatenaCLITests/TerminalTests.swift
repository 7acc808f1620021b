import Catena
import CatenaDemoServer
import CatenaTesting
import Foundation
import Testing
@testable import CatenaTestSupport

/// The command on a pseudo-terminal, as a person runs it: what a hostile server sends
/// must not drive the terminal.
enum PseudoTerminal {
    struct Screen {
        let status: Int32
        /// Everything written to the terminal (standard output and error), line ends as
        /// the terminal got them ("\r\n").
        let bytes: Data
        var text: String { String(decoding: bytes, as: UTF8.self) }
    }

    /// Runs `catena arguments…` with a pseudo-terminal as its standard output and
    /// error, through Python's `pty` module (Glibc's module map leaves `posix_openpt`
    /// out), and waits at most 60 s for it to end.
    static func run(_ arguments: [String]) async throws -> Screen {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catena-pty-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let screen = directory.appendingPathComponent("screen")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script, screen.path, try CatenaCommandLine.executable().path] + arguments
        process.standardInput = FileHandle.nullDevice
        let status = try await CatenaCommandLine.runToEnd(process)
        return Screen(status: status, bytes: try Data(contentsOf: screen))
    }

    /// Runs argv[2…] on a new pseudo-terminal, writes what it printed to argv[1] and
    /// exits with its status. The terminal is read as it is written: a full buffer
    /// would stop the command.
    static let script = """
        import os, pty, subprocess, sys
        master, slave = pty.openpty()
        child = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, close_fds=True)
        os.close(slave)
        screen = bytearray()
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            screen += chunk
        status = child.wait()
        open(sys.argv[1], "wb").write(screen)
        sys.exit(status if status >= 0 else 128 - status)
        """
}

@Suite(
    "catena on a terminal and in scripts: escapes shown, binary refused, credentials kept out of argv, HAR writes reported",
    .serialized, .enabled(if: !Timing.isThreadSanitized, "the command runs in child processes"))
struct TerminalTests {
    private func base() async throws -> String {
        try await TestServer.running().baseURL.absoluteString
    }

    private func scratch() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catena-terminal-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    @Test("escape sequences, C1 controls and bidi overrides from a server print escaped on a terminal, raw in a pipe")
    func escapes() async throws {
        let directory = try scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let hostile =
            "clip\u{1B}]52;c;ZXZpbA==\u{07} title\u{1B}]0;owned\u{07} link\u{1B}]8;;https://evil.test\u{1B}\\x\u{1B}]8;;\u{1B}\\ \u{202E}txt.exe C1\u{9B}31m end\n"
        let file = directory.appendingPathComponent("hostile.txt")
        try Data(hostile.utf8).write(to: file)
        let arguments = ["post", try await base() + "/api/echo-raw", "--upload", file.path]
        let screen = try await PseudoTerminal.run(arguments)
        #expect(screen.status == 0, "\(screen.text)")
        // The upload's progress bar clears its line with the command's own "ESC [ K".
        let shown = screen.text.replacingOccurrences(of: "\u{1B}[K", with: "")
        #expect(!shown.contains("\u{1B}"), "no raw ESC of the server's reaches the terminal: \(shown.debugDescription)")
        #expect(screen.bytes.firstRange(of: Data("\u{202E}".utf8)) == nil && screen.bytes.firstRange(of: Data("\u{9B}".utf8)) == nil)
        #expect(screen.text.contains(#"clip\u{1b}]52;c;ZXZpbA==\u{7}"#) && screen.text.contains(#"\u{202e}txt.exe C1\u{9b}31m end"#), "\(screen.text)")
        let piped = try await CatenaCommandLine.run(arguments)
        #expect(piped.output == Data(hostile.utf8), "a pipe gets the bytes as sent")

        // In JSON laid out for a reader, too: a string may hold a bidi override as it is.
        let json = try await PseudoTerminal.run(["post", try await base() + "/api/echo", "--json", "{\"name\": \"\u{202E}gnp.exe\"}"])
        #expect(json.status == 0, "\(json.text)")
        #expect(json.bytes.firstRange(of: Data("\u{202E}".utf8)) == nil && json.text.contains(#"\u{202e}gnp.exe"#), "\(json.text)")
    }

    @Test("a binary body is refused on a terminal with curl's message, shown with -o -, and a failing status is said")
    func binaryAndStatus() async throws {
        let url = try await base() + "/api/bytes/256"
        let refused = try await PseudoTerminal.run(["get", url])
        #expect(refused.status == 1, "\(refused.text)")
        #expect(refused.text.contains(#"Binary output can mess up your terminal. Use "--output -" to tell catena"#), "\(refused.text)")
        #expect(refused.bytes.count < 400, "the body was not written")
        let forced = try await PseudoTerminal.run(["get", url, "-o", "-"])
        #expect(forced.status == 0 && forced.bytes.count >= 256 && !forced.text.contains("Binary output"), "\(forced.bytes.count)")
        let piped = try await CatenaCommandLine.run(["get", url])
        #expect(piped.status == 0 && piped.output.count == 256)

        let unauthorized = try await CatenaCommandLine.run(["get", try await base() + "/api/protected/me"])
        #expect(unauthorized.status == 4)
        #expect(unauthorized.errors.contains("error: the server answered 401 Unauthorized"), "\(unauthorized.errors)")
    }

    @Test("--bearer, --basic and --api-key read @FILE, standard input or the environment; errors never echo them")
    func credentialSources() async throws {
        let directory = try scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let echo = try await base() + "/api/echo"
        func sent(_ outcome: CatenaCommandLine.Outcome, _ name: String) -> String? {
            (try? JSONDecoder().decode(Echo.self, from: outcome.output))?.header(name)
        }
        let tokenFile = directory.appendingPathComponent("token")
        try Data("FILE-t0k3n\n".utf8).write(to: tokenFile)
        let fromFile = try await CatenaCommandLine.run(["get", echo, "--bearer", "@" + tokenFile.path])
        #expect(fromFile.status == 0 && (sent(fromFile, "Authorization")) == "Bearer FILE-t0k3n", "\(fromFile.errors)")
        let fromInput = try await CatenaCommandLine.run(["get", echo, "--api-key", "-"], input: Data("STDIN-k3y\r\n".utf8))
        #expect(fromInput.status == 0 && (sent(fromInput, "X-API-Key")) == "STDIN-k3y", "\(fromInput.errors)")
        let fromEnvironment = try await CatenaCommandLine.run(["get", echo], environment: ["CATENA_BASIC": "ann:ENV-pa55"])
        let basic = "Basic " + Data("ann:ENV-pa55".utf8).base64EncodedString()
        #expect(fromEnvironment.status == 0 && (sent(fromEnvironment, "Authorization")) == basic, "\(fromEnvironment.errors)")

        let missing = try await CatenaCommandLine.run(["get", echo, "--bearer", "@" + directory.appendingPathComponent("none").path])
        #expect(missing.status == 2 && missing.errors.contains("the file cannot be read"), "\(missing.errors)")
        let twoLines = try await CatenaCommandLine.run(["get", echo, "--bearer", "-"], input: Data("LINE-one\nLINE-two\n".utf8))
        #expect(twoLines.status == 2 && !twoLines.errors.contains("LINE-"), "\(twoLines.errors)")
        let noPassword = try await CatenaCommandLine.run(["get", echo, "--basic", "SOLO-s3cr3t"])
        #expect(noPassword.status == 2 && !noPassword.errors.contains("SOLO-s3cr3t"), "\(noPassword.errors)")
        // Trust never weaker than asked: --pin's roots alone, so --ca-file beside it is refused.
        let both = try await CatenaCommandLine.run(["get", echo, "--ca-file", tokenFile.path, "--pin", tokenFile.path])
        #expect(both.status != 0 && both.errors.contains("give --ca-file or --pin, not both"), "\(both.errors)")
    }

    @Test("a failed HAR write is reported after the call's output and leaves the exit status to the call; racing runs lose no entry")
    func harWrites() async throws {
        let directory = try scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let blocker = directory.appendingPathComponent("not-a-folder")
        try Data("x".utf8).write(to: blocker)
        let url = try await base() + "/api/users/2"
        let failed = try await PseudoTerminal.run(["get", url, "--har", blocker.appendingPathComponent("x.har").path])
        #expect(failed.status == 0, "\(failed.text)")
        let body = try #require(failed.text.range(of: "Janet"))
        let report = try #require(failed.text.range(of: "error: cannot add to --har"), "\(failed.text)")
        #expect(body.lowerBound < report.lowerBound, "the HAR error comes after the body")

        let shared = directory.appendingPathComponent("shared.har")
        async let first = CatenaCommandLine.run(["get", url, "--har", shared.path])
        async let second = CatenaCommandLine.run(["get", url + "?n=2", "--har", shared.path])
        let (one, two) = try await (first, second)
        #expect(one.status == 0 && two.status == 0, "\(one.errors) \(two.errors)")
        #expect(try HAR(contentsOf: shared).log.entries.count == 2)
        let mode = try #require(FileManager.default.attributesOfItem(atPath: shared.path)[.posixPermissions] as? Int)
        #expect(mode == 0o600)
    }

    @Test("--cert and --key present a client certificate to a server that requires one; without them the handshake fails (35)")
    func clientCertificate() async throws {
        let directory = try scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let authority = try TLSServers.authority.get()
        let server = try await DemoServer.start(tls: DemoTLS(certificate: try authority.issue(), clientAuthorityDER: authority.certificateDER))
        defer { Task { await server.stop() } }
        let client = try authority.issueClient()
        let (ca, cert, key) = (directory.appendingPathComponent("ca.pem"), directory.appendingPathComponent("c.pem"), directory.appendingPathComponent("k.pem"))
        try authority.certificatePEM.write(to: ca, atomically: true, encoding: .utf8)
        try client.certificatePEM.write(to: cert, atomically: true, encoding: .utf8)
        try client.privateKeyPEM.write(to: key, atomically: true, encoding: .utf8)
        let url = server.baseURL.absoluteString + "/api/users/2"
        let presented = try await CatenaCommandLine.run(["get", url, "--ca-file", ca.path, "--cert", cert.path, "--key", key.path])
        #expect(presented.status == 0 && presented.text.contains("Janet"), "\(presented.errors)")
        let missing = try await CatenaCommandLine.run(["get", url, "--ca-file", ca.path])
        // TLS 1.3 ends the client's handshake before the server judges its certificate:
        // over HTTP/2 the refusal arrives as a closed connection (7), over HTTP/1.1 as the alert (35).
        #expect([7, 35].contains(missing.status), "status \(missing.status): \(missing.errors)")
        let http1 = try await CatenaCommandLine.run(["get", url, "--ca-file", ca.path, "--http1"])
        #expect(http1.status == 35 && http1.errors.contains("requires a client certificate"), "status \(http1.status): \(http1.errors)")
        let urlSession = try await CatenaCommandLine.run(["get", url, "--cert", cert.path, "--key", key.path, "--transport", "urlsession"])
        #expect(urlSession.status == 2 && urlSession.errors.contains("AsyncHTTPClientTransport"), "\(urlSession.errors)")
    }
}
