import Catena
import CatenaDemoServer
import CatenaTesting
import Foundation
import HTTPTypes
import Testing
@testable import CatenaTestSupport

/// The `catena` command as a user runs it: the built executable in a process of its
/// own, against the demo server on 127.0.0.1, its standard output and error captured.
enum CatenaCommandLine {
    struct Outcome {
        let status: Int32
        let output: Data
        let errors: String
        var text: String { String(decoding: output, as: UTF8.self) }
    }

    /// The `catena` executable built beside this test binary.
    static func executable() throws -> URL {
        let binary = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        let candidates = [binary, binary.deletingLastPathComponent(), URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()]
        for directory in candidates {
            let url = directory.appendingPathComponent("catena")
            if FileManager.default.isExecutableFile(atPath: url.path) { return url }
        }
        throw CommandLineError(description: "no catena executable beside \(binary.path): build the package (swift build --enable-all-traits)")
    }

    struct CommandLineError: Error, CustomStringConvertible { let description: String }

    /// Runs `process` and waits for its exit status; one that runs past 60 s is terminated.
    static func runToEnd(_ process: Process) async throws -> Int32 {
        let ended = AsyncStream<Int32>.makeStream()
        process.terminationHandler = { ended.continuation.yield($0.terminationStatus) }
        try process.run()
        let watchdog = Task {
            try await Task.sleep(for: .seconds(60))
            process.terminate()
        }
        defer { watchdog.cancel() }
        for await code in ended.stream { return code }
        return -1
    }

    /// Runs `catena arguments…`, standard input from `input` (or nothing), and waits
    /// at most 60 s for it to end. With a `wrapper` (a program and its arguments), runs
    /// that, with catena's path and `arguments` after it.
    ///
    /// `during` runs while the command does, with a way to read what it has printed so
    /// far: to answer a prompt it printed (approve a device code at a provider, say).
    static func run(
        _ arguments: [String], input: Data? = nil, environment: [String: String] = [:], wrapper: [String] = [],
        during: (@Sendable (_ printed: @Sendable () -> String) async throws -> Void)? = nil
    ) async throws -> Outcome {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catena-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let out = directory.appendingPathComponent("out"), err = directory.appendingPathComponent("err"), inFile = directory.appendingPathComponent("in")
        try Data().write(to: out)
        try Data().write(to: err)
        try (input ?? Data()).write(to: inFile)
        let process = Process()
        if let program = wrapper.first {
            process.executableURL = URL(fileURLWithPath: program)
            process.arguments = wrapper.dropFirst() + [try executable().path] + arguments
        } else {
            process.executableURL = try executable()
            process.arguments = arguments
        }
        // A developer's own proxy variables never steer a test's call: only those it gives.
        let proxyVariables: Set = ["http_proxy", "https_proxy", "all_proxy", "no_proxy"]
        process.environment = ProcessInfo.processInfo.environment.filter { !proxyVariables.contains($0.key.lowercased()) }.merging(environment) { $1 }
        process.standardOutput = try FileHandle(forWritingTo: out)
        process.standardError = try FileHandle(forWritingTo: err)
        process.standardInput = try FileHandle(forReadingFrom: inFile)
        async let ended = runToEnd(process)
        if let during {
            do {
                try await during { String(decoding: (try? Data(contentsOf: out)) ?? Data(), as: UTF8.self) }
            } catch {
                process.terminate()
                _ = try? await ended
                throw error
            }
        }
        let status = try await ended
        return Outcome(status: status, output: try Data(contentsOf: out), errors: String(decoding: try Data(contentsOf: err), as: UTF8.self))
    }
}

/// One command at a time, and not under ThreadSanitizer: the command runs in processes
/// of its own, whose sanitizer reports these tests do not read, and twenty instrumented
/// processes at once starved the in-process demo server until every pooled call of the
/// other suites timed out (CI, 2026-11-25).
@Suite(
    "catena request: any API through a Catena chain, from the command line", .serialized,
    .enabled(if: !Timing.isThreadSanitized, "the command runs in child processes; see the suite's comment"))
struct RequestCommandTests {
    static let transports = ["ahc", "urlsession"]

    private func base() async throws -> String {
        try await TestServer.running().baseURL.absoluteString
    }

    @Test("catena get prints the body byte for byte when piped, and exits 0", arguments: transports)
    func get(transport: String) async throws {
        let url = try await base() + "/api/users/2"
        let outcome = try await CatenaCommandLine.run(["get", url, "--transport", transport])
        #expect(outcome.status == 0, "\(outcome.errors)")
        let direct = try await TransportKind.asyncHTTPClient.make().load(try APIRequest(.get, urlString: url))
        #expect(outcome.output == direct.body)
        #expect(outcome.errors.isEmpty, "\(outcome.errors)")
    }

    @Test("catena get --cache: the next run answers from the directory, with its Age; CATENA_CACHE names it too", arguments: transports)
    func cache(transport: String) async throws {
        let directory = FileManager.default.temporaryDirectory.appending(path: "catena-cli-cache-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = UUID().uuidString
        let url = try await base() + "/api/cache/\(key)?max_age=60"
        let first = try await CatenaCommandLine.run(["get", url, "-i", "--cache", directory.path, "--transport", transport])
        #expect(first.status == 0)
        #expect(!first.text.lowercased().contains("\nage:"), "\(first.text)")
        let second = try await CatenaCommandLine.run(["get", url, "-i", "--transport", transport], environment: ["CATENA_CACHE": directory.path])
        #expect(second.status == 0, "\(second.errors)")
        #expect(second.text.lowercased().contains("\nage: "), "\(second.text)")
        #expect(first.errors == "* cache: miss\n" && second.errors == "* cache: hit\n", "\(first.errors) \(second.errors)")
        let stats = try await TransportKind.asyncHTTPClient.make().load(try APIRequest(.get, urlString: try await base() + "/api/cache-stats/\(key)"))
        let counts = try #require(try JSONSerialization.jsonObject(with: stats.body) as? [String: Int])
        #expect(counts["full"] == 1, "the second run asked no one: \(counts)")
        // Offline: what is there, whatever its age; nothing else, and never the network.
        let offline = try await CatenaCommandLine.run(["get", url, "--offline", "--cache", directory.path, "--transport", transport])
        #expect(offline.status == 0 && offline.output == second.output.suffix(offline.output.count), "\(offline.errors)")
        let missing = try await CatenaCommandLine.run(["get", url + "&other=1", "-i", "--offline", "--cache", directory.path, "--transport", transport])
        #expect(missing.text.hasPrefix("HTTP 504"), "\(missing.text)")
        let without = try await CatenaCommandLine.run(["get", url, "--offline", "--transport", transport], environment: ["CATENA_CACHE": ""])
        #expect(without.status != 0 && without.errors.contains("--offline answers from the cache"), "\(without.errors)")
        let after = try await TransportKind.asyncHTTPClient.make().load(try APIRequest(.get, urlString: try await base() + "/api/cache-stats/\(key)"))
        #expect(try JSONSerialization.jsonObject(with: after.body) as? [String: Int] == counts, "offline asked no one")
    }

    @Test("catena post --json sends the text as given, with its type; -i prints the head first", arguments: transports)
    func postJSON(transport: String) async throws {
        let json = "{\"name\": \"neo\",\n  \"job\": \"the one\", \"n\": 1.50}"
        let outcome = try await CatenaCommandLine.run(["post", try await base() + "/api/echo", "--json", json, "-i", "--transport", transport])
        #expect(outcome.status == 0, "\(outcome.errors)")
        let text = outcome.text
        #expect(text.hasPrefix("HTTP 200 OK\n"), "\(text)")
        let body = try #require(text.range(of: "\n\n").map { text[$0.upperBound...] })
        let echo = try JSONDecoder().decode(Echo.self, from: Data(body.utf8))
        #expect(echo.method == "POST")
        #expect(echo.body == json)
        #expect(echo.header("Content-Type") == "application/json")
    }

    @Test("a JSON body from standard input, a form body and query items", arguments: transports)
    func bodies(transport: String) async throws {
        let url = try await base() + "/api/echo"
        let piped = try await CatenaCommandLine.run(
            ["request", "put", url, "--json-file", "-", "--query", "a=1 2", "--transport", transport], input: Data("[1,2]".utf8))
        #expect(piped.status == 0, "\(piped.errors)")
        let echo = try JSONDecoder().decode(Echo.self, from: piped.output)
        #expect(echo.method == "PUT" && echo.body == "[1,2]" && echo.query == "a=1%202", "\(echo)")
        let form = try await CatenaCommandLine.run(["post", url, "--form", "name=a b", "--form", "x=&", "--transport", transport])
        let formEcho = try JSONDecoder().decode(Echo.self, from: form.output)
        #expect(formEcho.body == "name=a+b&x=%26", "\(formEcho)")
        #expect(formEcho.header("Content-Type")?.hasPrefix("application/x-www-form-urlencoded") == true)
    }

    @Test("exit status by outcome: 4xx, 5xx, timeout, refused connection, bad input", arguments: transports)
    func exitStatuses(transport: String) async throws {
        let base = try await base()
        let unauthorized = try await CatenaCommandLine.run(["get", base + "/api/basic-auth", "--transport", transport])
        #expect(unauthorized.status == 4, "\(unauthorized.errors)")
        let authorized = try await CatenaCommandLine.run(["get", base + "/api/basic-auth", "--basic", "catena:chains", "--transport", transport])
        #expect(authorized.status == 0 && authorized.text.contains("authenticated"), "\(authorized.errors)")
        let notFound = try await CatenaCommandLine.run(["get", base + "/api/status/404", "--transport", transport])
        #expect(notFound.status == 4)
        let unavailable = try await CatenaCommandLine.run(["get", base + "/api/status/503", "--transport", transport])
        #expect(unavailable.status == 5)
        let slow = try await CatenaCommandLine.run(["get", base + "/api/drip?chunks=100&interval=0.2", "--timeout", "0.5", "--transport", transport])
        #expect(slow.status == 28, "\(slow.errors)")
        #expect(slow.errors.contains("timed out"), "\(slow.errors)")
        let port = try await TestServer.closedPort()
        let refused = try await CatenaCommandLine.run(["get", "http://127.0.0.1:\(port)/", "--transport", transport])
        #expect(refused.status == 7, "\(refused.errors)")
        let badHeader = try await CatenaCommandLine.run(["get", base + "/api/echo", "-H", "no colon", "--transport", transport])
        #expect(badHeader.status == 2 && badHeader.errors.contains("is not \"Name: value\""), "\(badHeader.errors)")
        let notJSON = try await CatenaCommandLine.run(["post", base + "/api/echo", "--json", "{nope", "--transport", transport])
        #expect(notJSON.status == 2 && notJSON.errors.contains("--json is not JSON"), "\(notJSON.errors)")
        let redirect = try await CatenaCommandLine.run(["get", base + "/api/redirect?to=/api/users/2", "--no-follow", "-i", "--transport", transport])
        #expect(redirect.status == 0 && redirect.text.hasPrefix("HTTP 302"), "\(redirect.text)")
    }

    @Test(
        "an RFC 9457 problem: title and detail on standard error, the body as sent on standard output, escapes and echoed secrets gone", arguments: transports)
    func problem(transport: String) async throws {
        let outcome = try await CatenaCommandLine.run(["get", try await base() + "/api/problem", "--transport", transport])
        #expect(outcome.status == 4)
        #expect(
            outcome.errors.contains(
                "error: the server answered 403 Forbidden\n  You do not have enough credit.\n  Your current balance is 30, but that costs 50.\n"),
            "\(outcome.errors)")
        #expect(String(decoding: outcome.output, as: UTF8.self).contains(#""balance":30"#))
        let server = try await FaultServer.running()
        let hostile = try await CatenaCommandLine.run(["get", server.url(.hostileProblem).absoluteString, "--transport", transport])
        #expect(hostile.status == 5)
        #expect(hostile.errors.contains("  Out of  [31mcredit [0m  FAKE: log line txt.exe\n"), "\(hostile.errors.prefix(300))")
        #expect(!hostile.errors.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x202E || $0.value == 0x0D })
    }

    @Test("an upload with -o: the file goes up and the answer down, progress in plain lines when not a terminal", arguments: transports)
    func uploadToFile(transport: String) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catena-upload-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let source = directory.appendingPathComponent("source.bin"), saved = directory.appendingPathComponent("saved.bin")
        let bytes = patternData(3 << 20)
        try bytes.write(to: source)
        let outcome = try await CatenaCommandLine.run(
            ["post", try await base() + "/api/echo-raw", "--upload", source.path, "-o", saved.path, "--transport", transport])
        #expect(outcome.status == 0, "\(outcome.errors)")
        #expect(outcome.output.isEmpty)
        #expect(try Data(contentsOf: saved) == bytes)
        #expect(outcome.errors.contains("upload   3145728 of 3145728 bytes (100 %)"), "\(outcome.errors)")
        #expect(outcome.errors.contains("download 3145728 of 3145728 bytes (100 %)"), "\(outcome.errors)")
        #expect(!outcome.errors.contains("\r"), "no carriage returns when not a terminal")
    }

    @Test("--har appends each exchange, and HARReplayTransport answers with the very bytes printed", arguments: transports)
    func harReplays(transport: String) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catena-har-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let har = directory.appendingPathComponent("fixture.har")
        let base = try await base()
        let calls: [(method: HTTPRequest.Method, url: String, arguments: [String])] = [
            (.get, base + "/api/users/2", ["get", base + "/api/users/2"]),
            (.get, base + "/api/bytes/300", ["get", base + "/api/bytes/300", "--har-binary"]),
            (.post, base + "/api/echo", ["post", base + "/api/echo", "--json", "{ \"pretty\" :  true }"]),
        ]
        var printed: [Data] = []
        for call in calls {
            let outcome = try await CatenaCommandLine.run(call.arguments + ["--har", har.path, "--transport", transport])
            #expect(outcome.status == 0, "\(outcome.errors)")
            printed.append(outcome.output)
        }
        let replay = try HARReplayTransport(contentsOf: har)
        #expect(try HAR(contentsOf: har).log.entries.count == 3)
        for (call, body) in zip(calls, printed) {
            let response = try await replay.load(try APIRequest(call.method, urlString: call.url))
            #expect(response.body == body, "\(call.url)")
        }
    }

    @Test("no secret reaches the terminal, the curl command, the log, the trace or the HAR", arguments: transports)
    func secretsStayHidden(transport: String) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catena-secrets-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let har = directory.appendingPathComponent("secrets.har")
        let base = try await base()
        let shown = ["-i", "-v", "--curl", "--trace", "--har", har.path, "--transport", transport]
        // Sent to a route that does not echo: nothing may show anywhere.
        let bearer = try await CatenaCommandLine.run(
            [
                "get", base + "/api/protected/me", "--bearer", "TOKEN-b3ar3r", "--api-key", "KEY-4p1k3y", "--query", "api_key=QUERY-k3y",
                "-H", "Cookie: session=COOKIE-c00k13", "-H", "X-Custom-Secret: CUSTOM-h34d3r",
            ] + shown)
        #expect(bearer.status == 4, "\(bearer.errors)")
        #expect(bearer.errors.contains("curl ") && bearer.errors.contains("Spans") && bearer.errors.contains("→ GET"), "all of it printed")
        let basic = try await CatenaCommandLine.run(["get", base + "/api/basic-auth", "--basic", "catena:chains"] + shown)
        #expect(basic.status == 0, "\(basic.errors)")
        let credential = Data("catena:chains".utf8).base64EncodedString()
        // Echoed by the server: its body prints what it sent, but the log, curl and HAR hide it.
        let json = try await CatenaCommandLine.run(["post", base + "/api/echo", "--json", #"{"password": "BODY-s3cr3t"}"#] + shown)
        #expect(json.status == 0 && json.text.contains("BODY-s3cr3t"), "the echoed body is printed as sent")
        let recorded = try String(contentsOf: har, encoding: .utf8)
        let secrets = ["TOKEN-b3ar3r", "KEY-4p1k3y", "QUERY-k3y", "COOKIE-c00k13", "CUSTOM-h34d3r", credential, "chains", "BODY-s3cr3t"]
        for secret in secrets {
            #expect(!(bearer.text + basic.text).contains(secret), "\(secret) in the output")
            #expect(!(bearer.errors + basic.errors + json.errors).contains(secret), "\(secret) in the errors")
            #expect(!recorded.contains(secret), "\(secret) in the HAR")
        }
        // A cookie the server sets: its value neither in -i's head nor in the HAR's headers.
        let cookieHAR = directory.appendingPathComponent("cookie.har")
        let cookie = try await CatenaCommandLine.run(
            ["get", base + "/api/cookies/set?cookie=sid%3DSETCOOKIE-v4lu3", "-i", "--har", cookieHAR.path, "--transport", transport])
        #expect(cookie.status == 0 && cookie.text.lowercased().contains("set-cookie: <redacted>"), "\(cookie.text)")
        #expect(!cookie.text.contains("SETCOOKIE-v4lu3"))
        let headers = try #require(HAR(contentsOf: cookieHAR).log.entries.first).response.headers
        #expect(headers.contains { $0.name.lowercased() == "set-cookie" } && !headers.contains { $0.value.contains("SETCOOKIE-v4lu3") })
        // Names in the styles real APIs write them, values made up per run: none in the
        // head, the log, the curl command or the HAR (the echoed body prints them as sent).
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
        let names = ["accessToken", "X-Amz-Security-Token", "client_secret", "IdToken", "x-functions-key", "PRIVATE_TOKEN", "sessionId", "api.key"]
        var made: [String] = []
        var arguments = ["get", base + "/api/echo", "-i", "-v", "--curl", "--har", har.path, "--transport", transport]
        for index in 0..<4 {
            let name = names.randomElement(using: &generator)!
            let value = "GEN\(index)-" + String(UInt64.random(in: 1_000_000...UInt64.max, using: &generator), radix: 36)
            made.append(value)
            arguments += index % 2 == 0 ? ["--query", "\(name)=\(value)"] : ["-H", "\(name.replacingOccurrences(of: ".", with: "-")): \(value)"]
        }
        let generated = try await CatenaCommandLine.run(arguments)
        #expect(generated.status == 0, "\(generated.errors)")
        let head = String(generated.text.split(separator: "\n\n", maxSplits: 1).first ?? "")
        let archive = try String(contentsOf: har, encoding: .utf8)
        for value in made {
            #expect(!head.contains(value) && !generated.errors.contains(value) && !archive.contains(value), "seed \(seed): \(value)")
        }

        // A header typed without its colon: the error names the first word only.
        let typo = try await CatenaCommandLine.run(["get", base + "/api/echo", "-H", "Authorization Bearer TYPO-t0k3n", "--transport", transport])
        #expect(typo.status == 2 && typo.errors.contains("\"Authorization…\"") && !typo.errors.contains("TYPO-t0k3n"), "\(typo.errors)")
    }

    @Test("-o writes any status's body; a HAR file that cannot be added to is refused before anything is sent", arguments: transports)
    func outputAndArchiveChecks(transport: String) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catena-out-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let base = try await base()
        let saved = directory.appendingPathComponent("404.json")
        let notFound = try await CatenaCommandLine.run(["get", base + "/api/status/404", "-o", saved.path, "--transport", transport])
        #expect(notFound.status == 4)
        #expect(try Data(contentsOf: saved) == Data(#"{"status":404}"#.utf8))
        let withHAR = directory.appendingPathComponent("user.json"), har = directory.appendingPathComponent("user.har")
        let user = try await CatenaCommandLine.run(["get", base + "/api/users/2", "-o", withHAR.path, "--har", har.path, "--transport", transport])
        #expect(user.status == 0, "\(user.errors)")
        let entry = try #require(HAR(contentsOf: har).log.entries.first)
        #expect(entry.response.content.text.map { Data($0.utf8) } == (try Data(contentsOf: withHAR)), "the HAR keeps the body the file got")
        let broken = directory.appendingPathComponent("broken.har")
        try Data("not a HAR".utf8).write(to: broken)
        let key = UUID().uuidString
        let refused = try await CatenaCommandLine.run(
            [
                "post", base + "/api/orders", "--json", #"{"item":"\#(key)"}"#, "-H", "Idempotency-Key: \"\(key)\"", "--har", broken.path, "--transport",
                transport,
            ])
        #expect(refused.status == 2 && refused.errors.contains("is not a HAR file"), "\(refused.errors)")
        let count = try await CatenaCommandLine.run(["get", base + "/api/orders/count?item=\(key)", "--transport", transport])
        #expect(count.text == #"{"count":0}"#, "the order was never sent")
        let folder = try await CatenaCommandLine.run(["get", base + "/api/users/2", "-o", directory.path, "--transport", transport])
        #expect(folder.status == 2 && folder.errors.contains("is a folder"), "\(folder.errors)")
    }

    @Test("https to a plain HTTP port fails the TLS handshake: exit status 35 on both transports", arguments: transports)
    func handshakeFailure(transport: String) async throws {
        let url = try await base().replacingOccurrences(of: "http://", with: "https://") + "/api/users/2"
        let outcome = try await CatenaCommandLine.run(["get", url, "--transport", transport])
        #expect(outcome.status == 35, "\(outcome.errors)")
    }

    @Test("--pin trusts only the pinned root; another root's server is refused with exit status 60")
    func pinning() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catena-pin-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let pin = directory.appendingPathComponent("root.pem"), other = directory.appendingPathComponent("other.pem")
        try TLSServers.authority.get().certificatePEM.write(to: pin, atomically: true, encoding: .utf8)
        try DemoCertificateAuthority(commonName: "Another CA").certificatePEM.write(to: other, atomically: true, encoding: .utf8)
        let url = try await TLSServers.running().baseURL.absoluteString + "/api/users/2"
        let pinned = try await CatenaCommandLine.run(["get", url, "--pin", pin.path])
        #expect(pinned.status == 0 && pinned.text.contains("\"id\""), "\(pinned.errors)")
        let pinnedHTTP1 = try await CatenaCommandLine.run(["get", url, "--pin", pin.path, "--http1"])
        #expect(pinnedHTTP1.status == 0, "\(pinnedHTTP1.errors)")
        let refused = try await CatenaCommandLine.run(["get", url, "--pin", other.path])
        #expect(refused.status == 60, "\(refused.errors)")
        let unpinned = try await CatenaCommandLine.run(["get", url])
        #expect(unpinned.status == 60, "\(unpinned.errors)")
        let urlSession = try await CatenaCommandLine.run(["get", url, "--pin", pin.path, "--transport", "urlsession"])
        #expect(urlSession.status == 2 && urlSession.errors.contains("URLSession cannot use that trust"), "\(urlSession.errors)")
    }
}
