import ArgumentParser
import Catena
import CatenaAsyncHTTPClient
import CatenaTesting
import Foundation
import HTTPTypes
import Logging

/// `catena request METHOD URL`: one call to any API through a real Catena chain.
struct RequestCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "request",
        abstract: "Sends one request to any API through a Catena chain and prints the answer.",
        discussion: RequestCall.discussion
    )

    @Argument(help: "The method: GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS or another token.")
    var method: String

    @Argument(help: "The URL, http or https.")
    var url: String

    @OptionGroup var call: RequestCall

    func run() async throws { await call.perform(method: method, url: url) }
}

/// `catena get URL`: `catena request GET URL`.
struct GetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get", abstract: "Sends a GET through a Catena chain (catena request GET URL).", discussion: RequestCall.discussion)

    @Argument(help: "The URL, http or https.")
    var url: String

    @OptionGroup var call: RequestCall

    func run() async throws { await call.perform(method: "GET", url: url) }
}

/// `catena post URL`: `catena request POST URL`.
struct PostCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "post", abstract: "Sends a POST through a Catena chain (catena request POST URL).", discussion: RequestCall.discussion)

    @Argument(help: "The URL, http or https.")
    var url: String

    @OptionGroup var call: RequestCall

    func run() async throws { await call.perform(method: "POST", url: url) }
}

/// The options of `catena request`, `get` and `post`, and the call they describe.
struct RequestCall: ParsableArguments {
    static let discussion = """
        The call goes through the chain an app would use: [tracing] --> [retry] --> [log] --> [HAR recorder] --> transport, \
        with Catena's redirect rules (credentials never reach another origin) and its timeout covering the whole call. \
        The body is printed as the server sent it when piped or written with -o; on a terminal, JSON is indented and \
        coloured (NO_COLOR leaves the colours out), control characters and bidi overrides are shown escaped, and a \
        binary body is refused unless -o names a file or -. A final status of 400 or more is also said on standard \
        error, with the title and detail of an RFC 9457 problem body (application/problem+json) on their own lines \
        as well. The curl command, the log, the trace and progress go to standard error, and everything printed or \
        recorded is redacted: bearer tokens, passwords, API keys, cookies and secret query items never appear.

        Proxies: as curl, the AsyncHTTPClient transport reads http_proxy (lower case only), https_proxy or \
        HTTPS_PROXY, all_proxy or ALL_PROXY, and no_proxy or NO_PROXY, unless --proxy and --noproxy say otherwise; \
        --proxy "" goes direct. URLSession (--transport urlsession) follows those variables through libcurl and \
        takes no proxy options.

        \(ExitStatus.help)
        """

    @Option(name: [.customShort("H"), .customLong("header")], help: "A header field, \"Name: value\" (repeatable).")
    var headers: [String] = []

    @Option(name: .customLong("query"), help: "A query item, name=value, added to the URL's (repeatable).")
    var queryItems: [String] = []

    @Option(help: "A JSON body, given as text.")
    var json: String?

    @Option(help: "A JSON body read from this file; - reads standard input.")
    var jsonFile: String?

    @Option(name: .customLong("form"), help: "A form field, name=value, sent form-url-encoded (repeatable).")
    var formFields: [String] = []

    @Option(help: "Upload this file as the body (its type from -H Content-Type, else application/octet-stream).")
    var upload: String?

    @Option(help: "Send Authorization: Bearer TOKEN. @FILE reads it from a file, - from standard input; CATENA_BEARER is used when not given.")
    var bearer: String?

    @Option(
        help:
            "HTTP Basic, user:password; the password is asked for when left out. @FILE reads it from a file, - from standard input; CATENA_BASIC is used when not given."
    )
    var basic: String?

    @Option(
        help:
            "Send the OAuth token `catena login NAME` kept, refreshing it when it has expired (and keeping the new one); only to the origins the login recorded (its issuer's and each --resource), and --auth-origin's."
    )
    var auth: String?

    @Option(name: .customLong("auth-origin"), help: "Another origin (host or host:port) the --auth token may go to (repeatable).")
    var authOrigins: [String] = []

    @Option(help: "An API key, sent in --api-key-header. @FILE reads it from a file, - from standard input; CATENA_API_KEY is used when not given.")
    var apiKey: String?

    @Option(help: "The header that carries --api-key.")
    var apiKeyHeader = "X-API-Key"

    @Option(help: "Retry an idempotent request this many times after a connection failure, 5xx or 429 (with backoff).")
    var retry = 0

    @Option(help: "Seconds the whole call may take, redirects and body included.")
    var timeout: Double = 30

    @Flag(inversion: .prefixedNo, help: "Follow redirects (at most 5; secrets never to another origin).")
    var follow = true

    @Flag(help: "HTTP/1.1 only, no HTTP/2 (AsyncHTTPClient).")
    var http1 = false

    @Option(help: "Trust the CA certificates in this PEM file besides the system's (not with --pin).")
    var caFile: String?

    @Option(help: "Pin: trust only the root certificates in this PEM file (AsyncHTTPClient; pin the root of the server's chain).")
    var pin: String?

    @Option(help: "A client certificate for mutual TLS (AsyncHTTPClient): PEM (with the key, or --key), DER or P12, as --cert-type says.")
    var cert: String?

    @Option(help: "The private key of --cert, a PEM or DER file.")
    var key: String?

    @Option(help: "PEM (the default), DER or P12.")
    var certType = "PEM"

    @Option(help: "The password of a P12 --cert: prefer @FILE, - (standard input) or CATENA_CERT_PASSWORD, which keep it out of ps.")
    var pass: String?

    @Option(
        name: [.customShort("x"), .customLong("proxy")],
        help: "Go through this proxy: [http://|socks5://][user:password@]host[:port]; \"\" for none. Without it, the environment's as curl reads it.")
    var proxy: String?

    @Option(name: [.customShort("U"), .customLong("proxy-user")], help: "user:password for the proxy; @FILE reads it from a file, - from standard input.")
    var proxyUser: String?

    @Option(help: "Hosts reached without the proxy, as NO_PROXY lists them (overrides it): names, addresses, CIDR blocks, :port, or *.")
    var noproxy: String?

    @Option(
        help:
            "Public-key pins for the URL's host, curl's form: sha256//BASE64[;sha256//BASE64…] (AsyncHTTPClient; the leaf's key); redirects then stay on that origin."
    )
    var pinnedpubkey: String?

    @Option(help: "Connect to this Unix domain socket instead of the URL's host (AsyncHTTPClient); the URL still names the host.")
    var unixSocket: String?

    @Option(
        help:
            "HOST:PORT:ADDRESS, as curl: connect to ADDRESS for HOST on PORT (* any); the URL, Host, TLS name and pins stay HOST's (repeatable; AsyncHTTPClient)."
    )
    var resolve: [String] = []

    @Option(
        name: .customLong("connect-to"),
        help:
            "HOST1:PORT1:HOST2:PORT2, as curl: connect to HOST2 for HOST1 on PORT1; empty parts match any or keep the request's (repeatable; AsyncHTTPClient, same port)."
    )
    var connectTo: [String] = []

    @Option(help: "The transport: ahc (AsyncHTTPClient) or urlsession.")
    var transport: ConnectionOptions.TransportKind = .ahc

    @Flag(help: "Print the call's span tree and per-phase timing on standard error.")
    var trace = false

    @Flag(help: "Print the request as a curl command on standard error, secrets redacted.")
    var curl = false

    @Option(
        help: """
            Keep answers in this directory as HTTP allows (made 0700 when missing), and answer from it in later runs; \
            CATENA_CACHE is used when not given. -i (or -v) also says on standard error how the cache answered \
            (hit, revalidated, stale, stale-if-error, miss, unavailable); the Age field shows how old an answer from it is.
            """)
    var cache: String?

    @Flag(help: "Answer from --cache whatever an answer's age, never from the network; with nothing usable there, 504.")
    var offline = false

    @Option(help: "Append the exchange to this HAR file (made when missing), secrets redacted.")
    var har: String?

    @Flag(help: "With --har, record bodies that are not UTF-8 text as base64. They cannot be read for secrets, so are left out otherwise.")
    var harBinary = false

    @Option(
        name: .shortAndLong,
        help: "Write the body to this file, with a progress bar on a terminal; - writes it to standard output as it is, also a binary body on a terminal.")
    var output: String?

    @Option(
        name: [.customShort("w"), .customLong("write-out")],
        help:
            "After the body, print this text with curl's %{variables} filled in (http_code, time_total, time_starttransfer, size_download, url_effective, content_type, method, exitcode, errormsg, json); @FILE reads it from a file."
    )
    var writeOut: String?

    @Flag(name: [.customShort("i"), .customLong("include")], help: "Print the status line and header fields first.")
    var include = false

    @Flag(name: .shortAndLong, help: "Log the request and response on standard error, secrets redacted.")
    var verbose = false

    func validate() throws {
        let bodies = [json != nil, jsonFile != nil, !formFields.isEmpty, upload != nil].filter { $0 }.count
        guard bodies <= 1 else { throw ValidationError("give one body: --json, --json-file, --form or --upload") }
        guard bearer == nil || basic == nil else { throw ValidationError("give --bearer or --basic, not both") }
        guard auth == nil || (bearer == nil && basic == nil) else { throw ValidationError("give --auth, --bearer or --basic, not two of them") }
        guard caFile == nil || pin == nil else {
            throw ValidationError("give --ca-file or --pin, not both: --pin trusts its roots alone, and --ca-file would add others")
        }
        guard timeout > 0, timeout <= 86_400 else { throw ValidationError("--timeout must be more than 0 and at most 86400 seconds") }
        guard (0...10).contains(retry) else { throw ValidationError("--retry must be 0...10") }
        guard !(http1 && transport == .urlsession) else {
            throw ValidationError("--http1 needs --transport ahc: URLSession chooses the HTTP version itself")
        }
        let ahcOnly = [
            ("--proxy", proxy), ("--proxy-user", proxyUser), ("--noproxy", noproxy), ("--pinnedpubkey", pinnedpubkey), ("--unix-socket", unixSocket),
        ]
        if transport == .urlsession, !resolve.isEmpty || !connectTo.isEmpty {
            throw ValidationError("\(resolve.isEmpty ? "--connect-to" : "--resolve") needs --transport ahc: URLSession cannot be told where to connect")
        }
        if transport == .urlsession, let (option, _) = ahcOnly.first(where: { $0.1 != nil }) {
            throw ValidationError(
                "\(option) needs --transport ahc: URLSession on Linux follows the proxy environment variables by itself (libcurl) "
                    + "and has no pins or Unix sockets")
        }
    }

    /// `-w`'s format, read (from its file, for `@FILE`); nil without `-w`.
    func writeOutFormat() throws(CommandFailure) -> WriteOut? {
        guard let writeOut else { return nil }
        guard writeOut.hasPrefix("@") else { return try WriteOut(writeOut) }
        let path = String(writeOut.dropFirst())
        // A regular file only, read to a bound: a FIFO would block, /dev/zero never end.
        let attributes = try? FileManager.default.attributesOfItem(atPath: path)
        guard attributes?[.type] as? FileAttributeType == .typeRegular, let file = FileHandle(forReadingAtPath: path),
            let data = try? file.read(upToCount: 65_537), data.count <= 65_536, let text = String(data: data, encoding: .utf8)
        else {
            throw CommandFailure("-w @\(path): no readable UTF-8 file of at most 64 KiB")
        }
        try? file.close()
        return try WriteOut(text)
    }

    /// Sends the call, prints its outcome and exits with its ``ExitStatus``.
    func perform(method: String, url: String) async -> Never {
        await exit { recorder in try await send(method: method, url: url, recorder: recorder) }
    }

    /// Runs `work` with the `--har` recorder, prints its failure on standard error
    /// (escaped: a server's reason phrase is its own text), adds the recording to the
    /// file, and exits with the status.
    func exit(after work: (HARRecorder?) async throws -> ExitStatus) async -> Never {
        // A closed pipe is a failed write (exit 23, said on standard error), not a signal
        // that ends the process mid-answer; SwiftNIO ignores it too, but only once it opens a socket.
        signal(SIGPIPE, SIG_IGN)
        let status: ExitStatus
        let recorder = har.map { _ in HARRecorder(recordsUnreadableBodies: harBinary) }
        do {
            status = try await work(recorder)
        } catch let failure as CommandFailure {
            StandardError.writeText("error: \(failure.description)\n")
            status = .invalidInput
        } catch let failure as OutputFailure {
            StandardError.writeText("error: \(failure.description)\n")
            status = .writeFailed
        } catch let error as CatenaError {
            StandardError.writeText("error: \(TerminalText.escaped(error.description.replacingOccurrences(of: "\n", with: " ")))\n")
            status = ExitStatus.of(error)
        } catch {
            StandardError.writeText("error: \(TerminalText.escaped(String(describing: error)))\n")
            status = .failure
        }
        appendRecording(recorder)
        fflush(nil)
        Foundation.exit(status.rawValue)
    }

    private func send(method: String, url: String, recorder: HARRecorder?) async throws -> ExitStatus {
        // First: a wrong format fails before anything is read or sent.
        let writeOut = try writeOutFormat()
        if transport == .urlsession, let writeOut, writeOut.needsConnection {
            throw CommandFailure("-w: the connection's variables need --transport ahc: URLSession does not report its connections to Catena")
        }
        var request = try makeRequest(method: method, url: url)
        // Checked before anything is sent: a call is not made only to be thrown away.
        if let har { try checkArchive(har) }
        if let output, output != "-" {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: output, isDirectory: &isDirectory), isDirectory.boolValue {
                throw CommandFailure("-o \(output) is a folder; name a file")
            }
        }
        let redaction = Redaction.effective(for: request)
        // The bytes a download wrote (-w's size_download: /dev/null has no size to read).
        let downloaded = Locked<Int64>(0)
        var uploadProgress: ProgressDisplay?
        var downloadProgress: ProgressDisplay?
        if upload != nil {
            let display = ProgressDisplay(label: "upload  ")
            request[option: UploadProgress.self] = { display.update($0) }
            uploadProgress = display
        }
        // Streamed to the file as it arrives, unless the HAR needs the body in memory.
        if let output, output != "-", har == nil {
            let display = ProgressDisplay(label: "download")
            request[option: DownloadDestination.self] = DownloadDestination(file: URL(fileURLWithPath: output)) { progress in
                display.update(progress)
                downloaded.withLock { $0 = progress.completed }
            }
            downloadProgress = display
        }

        var (chain, shutdown) = try makeChain(for: &request, recorder: recorder, redaction: redaction)
        let report = trace ? TraceReport() : nil
        if let report { chain = report.instrument(chain) }

        // num_connects: the new connections of every exchange, redirects and retries included.
        let connects = Locked(0)
        if writeOut != nil {
            request.observe(
                CallObserver { event in
                    if case .connection(let connection) = event, !connection.isReused { connects.withLock { $0 += 1 } }
                })
        }
        // How the cache answered, for -i and -v: the last word, when a retry asked again.
        let cached = Locked<CallEvent.CacheOutcome?>(nil)
        if include || verbose {
            request.observe(CallObserver { event in if case .cache(let outcome) = event { cached.withLock { $0 = outcome } } })
        }
        let clock = ContinuousClock()
        let started = clock.now
        let result: Result<APIResponse, CatenaError>
        do {
            if let report {
                result = .success(try await report.run("catena request") { try await chain.load(request) })
            } else {
                result = .success(try await chain.load(request))
            }
        } catch let error as CatenaError {
            result = .failure(error)
        }
        let total = clock.now - started
        uploadProgress?.finish()
        downloadProgress?.finish()
        try? await shutdown()
        if let report { report.print(to: .standardError) }
        var values = WriteOut.Values(
            total: total, bodyBytes: 0, url: redaction.redact(urlString: (try? request.url().absoluteString) ?? url), method: method, exitCode: 0)
        values.seesConnections = transport != .urlsession
        values.connects = connects.withLock { $0 }
        if case .failure(let error) = result, let writeOut {
            values.exitCode = ExitStatus.of(error).rawValue
            values.error = error.description.replacingOccurrences(of: "\n", with: " ")
            try writeOut.write(values)
        }
        let response = try result.get()
        if let outcome = cached.withLock({ $0 }) { StandardError.write("* cache: \(outcome.rawValue)\n") }
        if include {
            let head = headText(status: response.status, fields: response.headerFields, redaction: redaction)
            try StandardOutput.write(Data((FileHandle.standardOutputIsTerminal ? TerminalText.escaped(head) : head).utf8))
        }
        var status = ExitStatus.of(status: response.status.code)
        if output == "-" {
            try StandardOutput.write(response.body)
        } else if let output {
            // A download went to the file as it came; any other body (an error's, or one
            // the HAR needed whole) is written now, as curl -o writes every body.
            if request[option: DownloadDestination.self] == nil || !(200..<300).contains(response.status.code) {
                do {
                    try response.body.write(to: URL(fileURLWithPath: output))
                } catch {
                    throw CommandFailure("cannot write -o \(output): \(error)")
                }
            }
            StandardError.writeText("\(response.status.code) \(response.status.reasonPhrase): body written to \(output)\n")
        } else if try !writeBody(response) {
            StandardError.write(TerminalText.binaryWarning)
            status = status == .success ? .failure : status
        }
        if response.status.code >= 400 {
            // A script's log shows why the status is not 0, also for an empty body.
            StandardError.writeText("error: the server answered \(response.status.code) \(response.status.reasonPhrase)\n")
            // An RFC 9457 body: its title and detail, on one line each, control characters
            // gone, and any secret the request sent that the server echoed redacted.
            if let shown = response.problem?.displayed(for: response.request, redaction: redaction) {
                if let title = shown.title { StandardError.writeText("  \(title)\n") }
                if let detail = shown.detail { StandardError.writeText("  \(detail)\n") }
            }
        }
        if let writeOut {
            values.status = response.status.code
            // The head arrived the body's duration before the call ended.
            values.timeToFirstByte = response.timing.map { max(.zero, total - ($0.bodyDuration ?? .zero)) }
            if let timing = response.timing {
                // The last exchange began its time to first byte before the head arrived.
                values.exchangeStarted = max(.zero, total - (timing.bodyDuration ?? .zero) - timing.timeToFirstByte)
                values.connection = timing.connection
            }
            values.connects = connects.withLock { $0 }
            let wentToFile = request[option: DownloadDestination.self] != nil && (200..<300).contains(response.status.code)
            values.bodyBytes = wentToFile ? Int(downloaded.withLock { $0 }) : response.body.count
            values.url = redaction.redact(urlString: (try? response.request.url().absoluteString) ?? url)
            values.contentType = response.headerFields[.contentType]
            values.exitCode = status.rawValue
            try writeOut.write(values)
        }
        return status
    }

    /// The chain the options ask for, ending in their transport, and how to shut it down:
    /// recording, `--curl`, `-v`, `--auth` and `--retry` in front. Sets the request's
    /// Unix socket.
    func makeChain(
        for request: inout APIRequest, recorder: HARRecorder?, redaction: Redaction
    ) throws -> (any HTTPLoader, @Sendable () async throws -> Void) {
        if let unixSocket { request[option: UnixSocket.self] = unixSocket }
        let (transport, shutdown) = try makeTransport(host: request.host ?? "")
        var chain: any HTTPLoader = transport
        if let recorder { chain = recorder --> chain }
        if curl { chain = CurlPrinter() --> chain }
        if verbose {
            var logger = Logger(label: "catena") { StandardErrorLogHandler(label: $0) }
            logger.logLevel = .debug
            chain = LogMiddleware(logger: logger, redaction: redaction) --> chain
        }
        // Below the sign-in, so that it sees the token: entries are kept per identity, and
        // one sign-in's (or no sign-in's) answers never reach another's run.
        let directory = cache ?? ProcessInfo.processInfo.environment["CATENA_CACHE"].flatMap { $0.isEmpty ? nil : $0 }
        if let directory {
            chain = CacheMiddleware(maximumBytes: 100 << 20, directory: URL(fileURLWithPath: directory)) --> chain
        }
        if offline {
            guard directory != nil else { throw CommandFailure("--offline answers from the cache: give --cache DIR, or set CATENA_CACHE") }
            request[option: CacheOffline.self] = true
        }
        if let auth {
            // The token goes only to the origins the login recorded and those named here; its
            // refreshes go through the same chain (logged and recorded, redacted).
            let login = try SavedLogin.load(auth)
            let allowed = Set(login.origins + authOrigins.map { $0.lowercased() })
            let url = try request.url()
            guard allowed.contains(SavedLogin.origin(of: url)) || allowed.contains(url.host?.lowercased() ?? "") && url.port == nil else {
                throw CommandFailure(
                    "the sign-in \(auth) is for \(login.origins.joined(separator: ", ")); to send its token to \(TerminalText.escaped(request.originName)) too, add --auth-origin \(TerminalText.escaped(request.originName))"
                )
            }
            if offline {
                // The saved token as it is, never refreshed (a refresh is a call to the
                // network): it names the identity whose answers the cache keeps.
                guard var token = try SavedLogin.storage.token(named: auth) else {
                    throw CommandFailure("no token is saved under \(auth): sign in with catena login \(auth) first")
                }
                token.expiresAt = nil
                chain =
                    TokenAuthMiddleware(hosts: allowed, token: token) { _ in
                        throw CommandFailure("the token saved under \(auth) was refused, and --offline does not renew it")
                    } --> chain
            } else {
                chain = TokenAuthMiddleware(hosts: allowed, client: login.client(loader: chain), storage: SavedLogin.storage, storageKey: auth) --> chain
            }
        }
        if retry > 0 { chain = RetryMiddleware(RetryStrategy(maxAttempts: retry + 1)) --> chain }
        return (chain, shutdown)
    }

    /// Appends what `recorder` holds to the HAR file, after the call's output; a failure
    /// is reported on standard error and leaves the exit status to the call.
    private func appendRecording(_ recorder: HARRecorder?) {
        guard let recorder, let har, !recorder.har.log.entries.isEmpty else { return }
        do throws(HARError) {
            try HAR.append(recorder.har.log.entries, toFileAt: URL(fileURLWithPath: har))
        } catch {
            StandardError.writeText("error: cannot add to --har \(har): \(error.description)\n")
        }
    }

    /// The body on standard output: raw for a pipe or a file; for a person on a
    /// terminal, JSON laid out and text with its control characters escaped, and no
    /// binary body at all (false then, as curl refuses one unless told `--output -`).
    private func writeBody(_ response: APIResponse) throws(OutputFailure) -> Bool {
        guard FileHandle.standardOutputIsTerminal else {
            try StandardOutput.write(response.body)
            return true
        }
        guard !TerminalText.isBinary(response.body) else { return false }
        let type = response.headerFields[.contentType]?.lowercased() ?? ""
        if type.contains("json"), let text = JSONDisplay.format(response.body, colours: ProcessInfo.processInfo.environment["NO_COLOR"] == nil) {
            try StandardOutput.write(Data(text.utf8))
        } else {
            try StandardOutput.write(Data(TerminalText.escaped(String(decoding: response.body, as: UTF8.self)).utf8))
        }
        return true
    }

    /// Refuses, before anything is sent, a HAR file this command could not add to.
    private func checkArchive(_ path: String) throws {
        // Empty is new: another run that is adding to it holds it empty while it locks it
        // (HAR.append makes the file to lock it, then renames the written one over it).
        guard let contents = FileManager.default.contents(atPath: path), !contents.isEmpty else { return }
        do {
            _ = try HAR(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw CommandFailure("--har \(path) is not a HAR file this command can add to: \(error)")
        }
    }
}

/// `--curl`: prints each attempt as it goes to the transport, secrets redacted.
struct CurlPrinter: HTTPMiddleware {
    func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        StandardError.writeText(request.curlDescription + "\n")
        return try await next.load(request)
    }
}
