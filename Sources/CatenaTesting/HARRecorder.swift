public import Catena
import Foundation
import HTTPTypes

/// Records the exchanges that pass through it as a HAR 1.2 archive, secrets redacted,
/// to open in a browser's developer tools or to replay with ``HARReplayTransport``:
///
/// ```swift
/// let recorder = HARRecorder()
/// let chain = EnvironmentMiddleware(environment) --> recorder --> AsyncHTTPClientTransport()
/// // … calls …
/// try recorder.har.write(to: URL(filePath: "session.har"))
/// ```
///
/// Put it right above the transport to see what goes over the wire. Secrets are
/// redacted by one rule (Catena's `SecretNames`, plus what the request's `Redaction` adds):
/// secret header values (each cookie of a `Cookie` header too), secret query values in
/// the URL, the query list and the URLs of `Location`, `Content-Location`, `Link` and
/// `Refresh`, and in bodies the values of secret form fields, JSON members at any depth
/// (JSON is read as JSON whatever its `Content-Type` says) and multipart parts. A
/// secret value the request carried is replaced wherever a response echoes it.
/// Bodies keep the bytes that crossed the wire: one with nothing to redact is recorded
/// as received (a pretty-printed JSON body is not re-serialised), one with a secret is
/// redacted in place, every other byte kept, and its `comment` says so. A body that
/// cannot be read for secrets (binary, not UTF-8, a JSON body that does not parse) or
/// is over `maximumBodyBytes` is left out with a comment saying why, unless
/// `recordsUnreadableBodies` asks for binary bodies as base64. Streamed bodies are not
/// recorded, only their size where known.
/// At most `maximumEntries` are kept; later ones are counted in ``droppedEntries``.
///
/// A WebSocket's upgrade is an entry of `_resourceType` "websocket" whose
/// `_webSocketMessages` hold the messages sent and received, as Chrome records them:
/// text scrubbed as bodies are (JSON secrets by name, values the request or an earlier
/// message carried), binary as base64 only with `recordsUnreadableBodies` (left out,
/// its size in `_omitted`, otherwise); at most ``maximumWebSocketMessages`` a socket.
public final class HARRecorder: HTTPMiddleware {
    private struct Entries {
        var kept: [HAR.Entry] = []
        var dropped = 0
        /// The messages of the sockets among `kept`, by index.
        var sockets: [Int: SocketMessages] = [:]
    }

    private let entries = Locked(Entries())
    /// The most messages recorded for one socket; later ones are not recorded.
    public static let maximumWebSocketMessages = 10_000
    private let maximumEntries: Int
    private let maximumBodyBytes: Int
    private let recordsUnreadableBodies: Bool

    /// A recorder.
    ///
    /// - Parameters:
    ///   - maximumEntries: the most exchanges kept; later ones are counted in ``droppedEntries``.
    ///   - maximumBodyBytes: the largest body recorded (read for secrets); a larger one is left out.
    ///   - recordsUnreadableBodies: record a body that is not UTF-8 text as base64,
    ///     unscrubbed. Off by default: such a body could carry a secret no one can find
    ///     in it. Turn it on only for APIs whose binary bodies hold none.
    public init(maximumEntries: Int = 1000, maximumBodyBytes: Int = 1 << 20, recordsUnreadableBodies: Bool = false) {
        self.maximumEntries = max(0, maximumEntries)
        self.maximumBodyBytes = max(0, maximumBodyBytes)
        self.recordsUnreadableBodies = recordsUnreadableBodies
    }

    /// The exchanges recorded so far, oldest first.
    public var har: HAR {
        let (kept, sockets) = entries.withLock { ($0.kept, $0.sockets) }
        var filled = kept
        for (index, socket) in sockets where index < filled.count {
            filled[index]._webSocketMessages = socket.messages
        }
        return HAR(entries: filled)
    }

    /// The exchanges not kept because `maximumEntries` were.
    public var droppedEntries: Int { entries.withLock { $0.dropped } }

    /// Forgets every recorded exchange.
    public func removeAll() {
        entries.withLock { $0 = Entries() }
    }

    public func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        try await recording(request, send: { () async throws(CatenaError) -> APIResponse in try await next.load(request) }) {
            ($0, $0.body, nil)
        }
    }

    public func stream(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> StreamedResponse {
        guard request.isWebSocketUpgrade else {
            return try await recording(request, send: { () async throws(CatenaError) -> StreamedResponse in try await next.stream(request) }) {
                ($0.head, nil, "streamed: the body is not recorded")
            }
        }
        // The socket's messages are recorded as they cross it, scrubbed with what this request carried.
        var scrubber = BodyScrubber(redaction: Redaction.effective(for: request), limit: maximumBodyBytes, keepsUnreadable: recordsUnreadableBodies)
        scrubber.learnSecrets(of: request, body: nil)
        let socket = SocketMessages(scrubber: scrubber, keepsBinary: recordsUnreadableBodies, request: request)
        var observed = request
        observed[option: WebSocketObservers.self].append { socket.record($0) }
        return try await recording(
            observed, send: { () async throws(CatenaError) -> StreamedResponse in try await next.stream(observed) }, socket: socket
        ) {
            ($0.head, nil, $0.status.code == 101 ? "a WebSocket: its messages are in _webSocketMessages" : nil)
        }
    }

    /// Sends `request` with `send` and records the exchange: what `describe` makes of
    /// the answer (the response, its body if it has one, a comment), or the failure.
    private func recording<Answer>(
        _ request: APIRequest, send: () async throws(CatenaError) -> Answer, socket: SocketMessages? = nil,
        describe: (Answer) -> (response: APIResponse, body: Data?, comment: String?)
    ) async throws(CatenaError) -> Answer {
        let started = Date(), clock = ContinuousClock.now
        let sentBody = await recordableBody(of: request)
        do {
            let answer = try await send()
            let (response, body, comment) = describe(answer)
            record(
                request, sentBody, started: started, elapsed: ContinuousClock.now - clock,
                response: response, body: body, comment: comment, socket: response.status.code == 101 ? socket : nil)
            return answer
        } catch {
            record(
                request, sentBody, started: started, elapsed: ContinuousClock.now - clock,
                response: error.response, body: error.response?.body ?? Data(), comment: nil, error: error.code)
            throw error
        }
    }

    /// The request body's bytes for the record: produced once more, for bodies held in
    /// memory only (a stream or file would have to be read twice).
    private func recordableBody(of request: APIRequest) async -> Data? {
        guard !request.body.isEmpty, request.body.stream == nil else { return nil }
        return try? await request.body.makeData()
    }

    private func record(
        _ request: APIRequest, _ sentBody: Data?, started: Date, elapsed: Duration,
        response: APIResponse?, body: Data?, comment: String?, error: CatenaError.Code? = nil, socket: SocketMessages? = nil
    ) {
        let redaction = Redaction.effective(for: request)
        let requestType = request.headerFields[.contentType] ?? request.body.contentType ?? "application/octet-stream"
        var scrubber = BodyScrubber(redaction: redaction, limit: maximumBodyBytes, keepsUnreadable: recordsUnreadableBodies)
        scrubber.learnSecrets(of: request, body: sentBody)
        let postData = sentBody.map { data in
            let (text, encoding, comment) = Self.content(scrubber.scrub(body: data, contentType: requestType))
            return HAR.PostData(mimeType: requestType, text: text ?? "", _encoding: encoding, comment: comment)
        }
        let harRequest = HAR.Request(
            method: request.method.rawValue, url: request.redactedURLString, httpVersion: "unknown", cookies: [],
            headers: request.headerFields.map { HAR.NameValue(name: $0.name.rawName, value: scrubber.printableValue(of: $0)) },
            queryString: request.queryItems.map { item in
                HAR.NameValue(name: item.name, value: redaction.isSecretQueryItem(item.name) ? Redaction.placeholder : item.value ?? "")
            },
            postData: postData, headersSize: -1, bodySize: sentBody?.count ?? (request.body.isEmpty ? 0 : -1))

        let responseType = response?.headerFields[.contentType]
        var content = HAR.Content(size: body?.count ?? -1, mimeType: responseType ?? "application/octet-stream", text: nil, encoding: nil, comment: comment)
        if let body, !body.isEmpty {
            let (text, encoding, note) = Self.content(scrubber.scrub(body: body, contentType: responseType))
            content.text = text
            content.encoding = encoding
            content.comment = note ?? comment
        }
        let location = response?.headerFields.first { $0.name == .location }
        let harResponse = HAR.Response(
            status: response?.status.code ?? 0, statusText: response?.status.reasonPhrase ?? "", httpVersion: "unknown",
            cookies: [], headers: response?.headerFields.map { HAR.NameValue(name: $0.name.rawName, value: scrubber.printableValue(of: $0)) } ?? [],
            content: content, redirectURL: location.map { scrubber.printableValue(of: $0) } ?? "", headersSize: -1,
            bodySize: body?.count ?? -1)

        let timing = response?.timing
        let firstByte = timing.map { Self.milliseconds($0.timeToFirstByte) } ?? Self.milliseconds(elapsed)
        let receive = timing?.bodyDuration.map(Self.milliseconds) ?? 0
        var entry = HAR.Entry(
            startedDateTime: Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(started),
            time: firstByte + receive, request: harRequest, response: harResponse, cache: HAR.Cache(),
            timings: Self.timings(timing, firstByte: firstByte, receive: receive), _error: error?.rawValue)
        if let connection = timing?.connection {
            entry.serverIPAddress = connection.remoteAddress
            entry.connection = connection.localPort.map(String.init)
            let version = connection.httpVersion == "2" ? "HTTP/2.0" : "HTTP/\(connection.httpVersion)"
            entry.request.httpVersion = version
            entry.response.httpVersion = version
        }
        if request.isWebSocketUpgrade { entry._resourceType = "websocket" }
        entries.withLock { entries in
            if entries.kept.count < maximumEntries {
                if let socket { entries.sockets[entries.kept.count] = socket }
                entries.kept.append(entry)
            } else {
                entries.dropped += 1
            }
        }
    }

    /// HAR's phases of an exchange: the connection's set-up (DNS, TCP and TLS together,
    /// as AsyncHTTPClient shows them; `dns` and `ssl` stay -1), sending, waiting and
    /// receiving, which add up to `firstByte + receive`. Without a connection seen, all
    /// of the time to the head is `wait`.
    private static func timings(_ timing: ResponseTiming?, firstByte: Double, receive: Double) -> HAR.Timings {
        guard let timing, let connection = timing.connection, let sent = timing.requestSent.map(milliseconds) else {
            return HAR.Timings(blocked: -1, dns: -1, connect: -1, ssl: -1, send: 0, wait: firstByte, receive: receive)
        }
        let connect = connection.readyAfter.map(milliseconds)
        // Each phase from where the one before it ended, none below 0 (clocks read on two threads).
        // A request whose end went out after the head (an early answer) sent until the head.
        let send = min(max(0, sent - (connect ?? 0)), max(0, firstByte - (connect ?? 0)))
        return HAR.Timings(blocked: -1, dns: -1, connect: connect ?? -1, ssl: -1, send: send, wait: max(0, firstByte - (connect ?? 0) - send), receive: receive)
    }

    /// A scrubbed body as a HAR content's text, encoding and comment.
    private static func content(_ scrubbed: BodyScrubber.Scrubbed) -> (text: String?, encoding: String?, comment: String?) {
        switch scrubbed {
        case .text(let text, let redacted): (text, nil, redacted ? BodyScrubber.redactedNote : nil)
        case .binary(let data, let redacted): (data.base64EncodedString(), "base64", redacted ? BodyScrubber.redactedNote : nil)
        case .omitted(let reason): (nil, nil, "not recorded: \(reason)")
        }
    }

    private static func milliseconds(_ duration: Duration) -> Double {
        // Microsecond precision is plenty for a viewer.
        ((Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15) * 1000).rounded() / 1000
    }
}

/// The messages of one recorded socket, scrubbed as they are added. Each text message
/// sent teaches the scrubber its secret JSON members, so a server's echo of them is
/// scrubbed too. Binary messages cannot be read for secrets: they are left out unless
/// `recordsUnreadableBodies`, then kept as base64, unscrubbed, as binary bodies are.
final class SocketMessages: Sendable {
    private struct State {
        var scrubber: BodyScrubber
        var messages: [HAR.WebSocketMessage] = []
    }

    private let state: Locked<State>
    private let keepsBinary: Bool
    /// What sent text messages are read as, to learn their secrets.
    private let carrier: APIRequest

    init(scrubber: BodyScrubber, keepsBinary: Bool, request: APIRequest) {
        state = Locked(State(scrubber: scrubber))
        self.keepsBinary = keepsBinary
        var carrier = APIRequest(.post, url: URL(string: "http://socket.invalid/")!)
        carrier.headerFields[.contentType] = "application/json"
        carrier[option: Redaction.self] = request[option: Redaction.self]
        self.carrier = carrier
    }

    var messages: [HAR.WebSocketMessage] {
        state.withLock { $0.messages }
    }

    func record(_ event: WebSocketMessageEvent) {
        let time = event.time.timeIntervalSince1970
        let type = event.sent ? "send" : "receive"
        state.withLock { state in
            guard state.messages.count < HARRecorder.maximumWebSocketMessages else { return }
            switch event.message {
            case .text(let text):
                let bytes = Data(text.utf8)
                if event.sent { state.scrubber.learnSecrets(of: carrier, body: bytes) }
                let data: String =
                    switch state.scrubber.scrub(body: bytes, contentType: nil) {
                    case .text(let scrubbed, _): scrubbed
                    case .binary, .omitted: "(not recorded: a text message over the recording limit)"
                    }
                state.messages.append(HAR.WebSocketMessage(type: type, time: time, opcode: 1, data: data))
            case .binary(let bytes):
                // Opcode 2 is always base64, as Chrome writes it; empty when left out.
                let data = keepsBinary ? bytes.base64EncodedString() : ""
                state.messages.append(HAR.WebSocketMessage(type: type, time: time, opcode: 2, data: data, _omitted: keepsBinary ? nil : bytes.count))
            }
        }
    }
}
