public import Logging
import HTTPTypes

/// Logs every request and its outcome on a swift-log `Logger`, with secrets redacted.
///
/// A request is logged before it goes down the chain, its response (status, size,
/// duration) or error when it comes back. Header values and query items named in
/// ``redaction`` print as `<redacted>`; bodies are never read, so a body is produced
/// only by the transport. When the logger's level is above ``level`` this loader adds
/// one comparison per request and nothing else.
public struct LogMiddleware: HTTPMiddleware {
    /// Where to log.
    public var logger: Logger
    /// The level for requests and responses. Failures log one step higher
    /// (debug → info, info → notice, …).
    public var level: Logger.Level
    /// What not to print, besides what the request's own ``Redaction`` option names.
    /// A custom redaction is added to each request passed on, so the description of
    /// an error from below hides the same values.
    public var redaction: Redaction {
        didSet { isDefaultRedaction = redaction == .default }
    }
    private var isDefaultRedaction: Bool
    /// Whether to print header fields (redacted) with each request and response.
    public var logsHeaders: Bool
    /// Whether to print each request as a `curl` command too (redacted, see
    /// ``APIRequest/curlDescription``), to reproduce it from a shell.
    public var logsCurlCommands: Bool

    /// A log loader. The defaults log at `.debug`, headers included, with
    /// ``Redaction/default``, without `curl` commands.
    public init(
        logger: Logger, level: Logger.Level = .debug, redaction: Redaction = .default, logsHeaders: Bool = true,
        logsCurlCommands: Bool = false
    ) {
        self.logger = logger
        self.level = level
        self.redaction = redaction
        self.isDefaultRedaction = redaction == .default
        self.logsHeaders = logsHeaders
        self.logsCurlCommands = logsCurlCommands
    }

    public func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        guard logs else { return try await next.load(withRedaction(request)) }
        return try await loadLogged(withRedaction(request), next: next)
    }

    /// Whether the logger logs at `level`.
    private var logs: Bool {
        @inline(never) get { logger.logLevel <= level }
    }

    /// `load` when the level logs. A function of its own, so a chain that logs nothing
    /// keeps no room in its task's frames for the target, the clock and the response.
    @inline(never)
    private func loadLogged(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        let redaction = Redaction.effective(for: request)
        let target = "\(request.method.rawValue) \(request.assembleURL(redacting: redaction))"
        logger.log(level: level, "→ \(target)", metadata: headers(request.headerFields, redaction))
        if logsCurlCommands { logger.log(level: level, "\(request.curlDescription(redacting: redaction))") }
        let start = ContinuousClock.now
        do {
            let response = try await next.load(request)
            let elapsed = ContinuousClock.now - start
            var metadata = headers(response.headerFields, redaction, problem: response.status.code >= 400 ? response.problem : nil, of: response.request)
            if let connection = response.timing?.connection { metadata["connection"] = "\(Self.describe(connection))" }
            logger.log(
                level: level,
                "← \(response.status.code) \(response.status.reasonPhrase) \(target) (\(response.body.count) bytes, \(elapsed.formattedMilliseconds))",
                metadata: metadata)
            return response
        } catch {
            let elapsed = ContinuousClock.now - start
            logger.log(level: level.oneHigher, "✗ \(target): \(Self.summary(error)) (\(elapsed.formattedMilliseconds))")
            throw error
        }
    }

    /// `request` carrying this loader's redaction too (the request's own already holds
    /// what EnvironmentMiddleware injected above), so an error from below hides the same.
    ///
    /// This and `logs` are `@inline(never)`, so their temporaries take no room in
    /// `load`'s async frame (Architecture: "Async frames stay small").
    @inline(never)
    private func withRedaction(_ request: APIRequest) -> APIRequest {
        guard !isDefaultRedaction else { return request }
        var request = request
        redaction.added(to: &request)
        return request
    }

    /// The headers, when logged, and an RFC 9457 problem's type and title (never its
    /// detail or members, which may echo what the request sent).
    private func headers(_ fields: HTTPFields, _ redaction: Redaction, problem: ProblemDetails? = nil, of request: APIRequest? = nil) -> Logger.Metadata {
        var metadata: Logger.Metadata = [:]
        if logsHeaders, !fields.isEmpty { metadata["headers"] = "\(redaction.describe(fields))" }
        if let problem, let request {
            metadata["problem.type"] = "\(ProblemDetails.printable(redaction.scrub(problem.type, secretsOf: request), limit: 200))"
            if let title = problem.displayed(for: request, redaction: redaction).title { metadata["problem.title"] = "\(title)" }
        }
        return metadata
    }

    /// The exchange's connection, as the `connection` metadata of the response's line:
    /// new (and how long it took to be ready) or reused, where to, the HTTP and TLS versions.
    static func describe(_ connection: ConnectionInfo) -> String {
        var text = connection.isReused ? "reused " : "new "
        if let address = connection.remoteAddress {
            text += address.contains(":") ? "[\(address)]" : address
            text += connection.remotePort.map { ":\($0)" } ?? ""
        } else {
            text += "(no address)"
        }
        if let ready = connection.readyAfter { text += ", ready after \(ready.formattedMilliseconds)" }
        text += ", HTTP/\(connection.httpVersion)"
        if let tls = connection.tlsVersion { text += ", \(tls)" }
        if let cipher = connection.tlsCipherSuite { text += " \(cipher)" }
        return text
    }

    private static func summary(_ error: CatenaError) -> String {
        let sent = error.response?.request ?? error.request
        let problem = error.problem?.displayed(for: sent, redaction: .effective(for: sent)).title.map { " (\($0))" } ?? ""
        return "\(error.code)\(problem)\(error.detail.map { ": \($0)" } ?? "")"
    }
}

extension LogMiddleware {
    /// Logs a stream's head when it arrives, and its size and duration when its body
    /// ends (or how it failed).
    public func stream(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> StreamedResponse {
        let request = withRedaction(request)
        guard logger.logLevel <= level else { return try await next.stream(request) }
        let redaction = Redaction.effective(for: request)
        let target = "\(request.method.rawValue) \(request.assembleURL(redacting: redaction))"
        logger.log(level: level, "→ \(target) (stream)")
        if logsCurlCommands { logger.log(level: level, "\(request.curlDescription(redacting: redaction))") }
        let start = ContinuousClock.now
        let streamed: StreamedResponse
        do {
            streamed = try await next.stream(request)
        } catch {
            logger.log(level: level.oneHigher, "✗ \(target): \(Self.summary(error)) (\((ContinuousClock.now - start).formattedMilliseconds))")
            throw error
        }
        var metadata = headers(streamed.headerFields, redaction)
        if let connection = streamed.timing?.connection { metadata["connection"] = "\(Self.describe(connection))" }
        logger.log(
            level: level,
            "← \(streamed.status.code) \(streamed.status.reasonPhrase) \(target) (head after \((ContinuousClock.now - start).formattedMilliseconds))",
            metadata: metadata)
        let logger = logger, level = level
        streamed.body.whenEnded { bytes, error in
            let elapsed = (ContinuousClock.now - start).formattedMilliseconds
            if let error {
                logger.log(level: level.oneHigher, "✗ \(target): body ended after \(bytes) bytes: \(Self.summary(error)) (\(elapsed))")
            } else {
                logger.log(level: level, "✓ \(target): body complete, \(bytes) bytes (\(elapsed))")
            }
        }
        return streamed
    }
}

extension Logger.Level {
    var oneHigher: Logger.Level {
        switch self {
        case .trace: .debug
        case .debug: .info
        case .info: .notice
        case .notice: .warning
        case .warning: .error
        case .error, .critical: .critical
        }
    }
}

extension Duration {
    /// "12.34 ms"
    var formattedMilliseconds: String {
        let ms = Double(components.seconds) * 1000 + Double(components.attoseconds) / 1e15
        return "\((ms * 100).rounded() / 100) ms"
    }
}
