import Catena
import CatenaDemoServer
import Foundation
import Testing
@testable import CatenaCLI
@testable import CatenaTestSupport

/// `-w`/`--write-out`: the format as curl reads it, then the command on both transports.
@Suite("catena -w", .serialized, .enabled(if: !Timing.isThreadSanitized, "the command runs in child processes; see RequestCommandTests"))
struct WriteOutTests {
    private static let values = WriteOut.Values(
        status: 201, total: .milliseconds(1500), timeToFirstByte: .milliseconds(250), bodyBytes: 42, url: "http://h/x",
        contentType: "text/\u{1B}[31mplain", method: "POST", exitCode: 0)

    @Test("variables, %%, and curl's backslash escapes")
    func format() throws {
        let writeOut = try WriteOut(#"%{http_code} %{time_total}s %{time_starttransfer}\t%{size_download}B 100%% %{method}\n"#)
        #expect(writeOut.render(Self.values, forTerminal: false) == "201 1.500000s 0.250000\t42B 100% POST\n")
        #expect(try WriteOut("%{content_type}").render(Self.values, forTerminal: true) == #"text/\u{1b}[31mplain"#)
        #expect(
            try WriteOut("%{response_code}").render(WriteOut.Values(total: .zero, bodyBytes: 0, url: "", method: "GET", exitCode: 7), forTerminal: false)
                == "000")
        let json = try WriteOut("%{json}").render(Self.values, forTerminal: true)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        #expect(object["http_code"] as? Int == 201 && object["size_download"] as? Int == 42 && object["url_effective"] as? String == "http://h/x")
        #expect(!json.unicodeScalars.contains("\u{1B}"))
    }

    @Test("an unknown variable, one not measured yet, and a %{ without } are refused by name")
    func refused() {
        let unknown = #expect(throws: CommandFailure.self) { try WriteOut("%{bogus}") }
        #expect(unknown?.description.contains("no variable %{bogus}") == true)
        let unmeasured = #expect(throws: CommandFailure.self) { try WriteOut("%{time_namelookup}") }
        #expect(unmeasured?.description.contains("not measured") == true)
        #expect(throws: CommandFailure.self) { try WriteOut("%{http_code") }
        let escaped = #expect(throws: CommandFailure.self) { try WriteOut("%{\u{1B}]0;x\u{7}}") }
        #expect(escaped?.description.unicodeScalars.contains("\u{1B}") == false)
    }

    @Test("random formats never trap; text without variables comes back as written (3,000 cases)")
    func randomFormats() throws {
        let alphabet = Array("%{}\\ntr_ab http_code json é\u{0}\u{1B}")
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<3000 {
            let text = String((0..<Int.random(in: 0...30, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! })
            guard let writeOut = try? WriteOut(text) else { continue }
            let rendered = writeOut.render(Self.values, forTerminal: false)
            if !text.contains("%"), !text.contains("\\") { #expect(rendered == text) }
        }
    }

    @Test("the command prints the format after the body, on both transports", arguments: ["ahc", "urlsession"])
    func command(transport: String) async throws {
        let url = try await TestServer.running().baseURL.absoluteString + "/api/users/2"
        let outcome = try await CatenaCommandLine.run(["get", url, "--transport", transport, "-w", #"\n%{http_code} %{size_download} %{url_effective}\n"#])
        #expect(outcome.status == 0, "\(outcome.errors)")
        let lines = outcome.text.split(separator: "\n")
        let body = try await TransportKind.asyncHTTPClient.make().load(try APIRequest(.get, urlString: url)).body
        #expect(lines.last == "200 \(body.count) \(url)")
        let file = FileManager.default.temporaryDirectory.appending(path: "catena-w-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        let json = try await CatenaCommandLine.run(["get", url, "--transport", transport, "-o", file.path, "-w", "%{json}"])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.text.utf8)) as? [String: Any], "\(json.text)")
        let total = try #require(object["time_total"] as? Double)
        let firstByte = try #require(object["time_starttransfer"] as? Double)
        #expect(total > 0 && firstByte > 0 && firstByte <= total)
        #expect(object["http_code"] as? Int == 200)
        #expect(object["size_download"] as? Int == body.count, "counted as written, not read back from the file")
        // A secret query item is redacted, as everywhere the command prints a URL.
        let secret = try await CatenaCommandLine.run(["get", url + "?api_key=hunter2", "--transport", transport, "-w", "%{url_effective}"])
        #expect(!secret.text.contains("hunter2"), "\(secret.text)")
    }

    @Test("the connection's variables on a new connection; %{json} counts it; -v shows it on the response's line")
    func connection() async throws {
        let server = try await TestServer.running()
        let url = server.baseURL.absoluteString + "/api/users/2"
        let format = "%{http_version} %{remote_ip} %{remote_port} %{num_connects} %{time_connect} %{time_appconnect} %{time_pretransfer} %{time_starttransfer}"
        let outcome = try await CatenaCommandLine.run(["get", url, "-o", "-", "-w", "\n" + format])
        #expect(outcome.status == 0, "\(outcome.errors)")
        let fields = try #require(outcome.text.split(separator: "\n").last).split(separator: " ").map(String.init)
        #expect(Array(fields.prefix(4)) == ["1.1", "127.0.0.1", String(server.port), "1"], "\(fields)")
        let connect = try #require(Double(fields[4])), pretransfer = try #require(Double(fields[6])), firstByte = try #require(Double(fields[7]))
        #expect(connect > 0 && pretransfer <= firstByte, "\(fields)")
        #expect(fields[5] == "0.000000", "no TLS, no time_appconnect, as curl")
        let json = try await CatenaCommandLine.run(["get", url, "-o", "/dev/stdout", "-w", "\n%{json}"])
        let object = try #require(try JSONSerialization.jsonObject(with: Data((json.text.split(separator: "\n").last ?? "").utf8)) as? [String: Any])
        #expect(object["num_connects"] as? Int == 1 && object["remote_port"] as? Int == server.port, "\(object)")
        #expect(object["http_version"] as? String == "1.1")
        // URLSession reports no connection: its %{json} leaves those keys out rather than print 0.
        let unseen = try await CatenaCommandLine.run(["get", url, "--transport", "urlsession", "-o", "/dev/stdout", "-w", "\n%{json}"])
        let unseenObject = try #require(
            try JSONSerialization.jsonObject(with: Data((unseen.text.split(separator: "\n").last ?? "").utf8)) as? [String: Any])
        #expect(unseenObject["http_code"] as? Int == 200 && unseenObject["num_connects"] == nil && unseenObject["remote_ip"] == nil, "\(unseenObject)")
        let verbose = try await CatenaCommandLine.run(["get", url, "-v", "-o", "-"])
        #expect(verbose.errors.contains("connection=new 127.0.0.1:\(server.port), ready after"), "\(verbose.errors)")
        #expect(verbose.errors.contains("HTTP/1.1"))
    }

    @Test("nginx over TLS and HTTP/2 reports what the command prints", .enabled(if: NginxProcess.testsRun))
    func nginx() async throws {
        let authority = try DemoCertificateAuthority()
        let certificate = try authority.issue()
        let nginx = try await NginxProcess.start(
            locations: #"location /seen { default_type text/plain; return 200 "$server_protocol $ssl_protocol $server_port"; }"#,
            tls: .init(certificatePEM: certificate.certificatePEM, privateKeyPEM: certificate.privateKeyPEM, http2: true))
        defer { nginx.stop() }
        let ca = FileManager.default.temporaryDirectory.appending(path: "catena-w-ca-\(UUID().uuidString).pem")
        defer { try? FileManager.default.removeItem(at: ca) }
        try authority.certificatePEM.write(to: ca, atomically: true, encoding: .utf8)
        let outcome = try await CatenaCommandLine.run(
            ["get", "https://127.0.0.1:\(nginx.port)/seen", "--ca-file", ca.path, "-o", "-", "-w", "\n%{http_version} %{remote_port} %{time_appconnect}"])
        #expect(outcome.status == 0, "\(outcome.errors)")
        let lines = outcome.text.split(separator: "\n")
        // nginx 1.22 offers up to TLS 1.2 unless told (1.23.4 added 1.3 to its default).
        #expect(lines.first?.hasPrefix("HTTP/2.0 TLSv1.") == true && lines.first?.hasSuffix(" \(nginx.port)") == true, "\(lines)")
        let fields = try #require(lines.last).split(separator: " ")
        #expect(fields.prefix(2) == ["2", "\(nginx.port)"], "\(fields)")
        #expect((Double(fields.last ?? "") ?? 0) > 0, "a TLS connection has its appconnect time")
    }

    @Test("a failed call prints 000 and its exit code; a wrong format fails before anything is sent")
    func failures() async throws {
        let refused = try await CatenaCommandLine.run(["get", "http://127.0.0.1:9/x", "-w", "%{http_code} %{exitcode}"])
        #expect(refused.status == 7, "\(refused.errors)")
        #expect(refused.text == "000 7")
        let server = try await DemoServer.start()
        defer { Task { await server.stop() } }
        let wrong = try await CatenaCommandLine.run(["get", server.baseURL.absoluteString + "/api/users/2", "-w", "%{time_namelookup}"])
        #expect(wrong.status == 2 && wrong.errors.contains("time_namelookup"), "\(wrong.errors)")
        // URLSession does not report its connections: their variables are refused, not printed as 0.
        let unseen = try await CatenaCommandLine.run(
            ["get", server.baseURL.absoluteString + "/api/users/2", "--transport", "urlsession", "-w", "%{remote_ip}"])
        #expect(unseen.status != 0 && unseen.errors.contains("--transport ahc"), "\(unseen.errors)")
        #expect(server.requestsRead == 0)
        // A FIFO as the format's file would block: refused without reading.
        let fifo = FileManager.default.temporaryDirectory.appending(path: "catena-w-fifo-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: fifo) }
        #expect(mkfifo(fifo.path, 0o600) == 0)
        let blocked = try await CatenaCommandLine.run(["get", server.baseURL.absoluteString + "/api/users/2", "-w", "@" + fifo.path])
        #expect(blocked.status == 2 && blocked.errors.contains("no readable UTF-8 file"), "\(blocked.errors)")
    }
}
