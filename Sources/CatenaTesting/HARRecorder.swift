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
/// Put it right above the transport to see what goes over the wire. Redacted as the
/// request's `Redaction` says (never less than the default): secret header values,
/// secret query values in the URL and the query list, and, in form and JSON bodies
/// (request and response), the values of fields with the same secret names
/// (`password`, `access_token`, …) and, in JSON, of keys named like a secret header.
/// Bodies keep the bytes that crossed the wire: one with nothing to redact is recorded
/// as received (a pretty-printed JSON body is not re-serialised), one with a secret is
/// redacted in place, every other byte kept, and its `comment` says so. A body over
/// `maximumBodyBytes`, a streamed request body and a streamed response body are not
/// recorded, only their size where known.
/// At most `maximumEntries` are kept; later ones are counted in ``droppedEntries``.
public final class HARRecorder: HTTPMiddleware {
    private let entries = Locked<(kept: [HAR.Entry], dropped: Int)>(([], 0))
    private let maximumEntries: Int
    private let maximumBodyBytes: Int

    /// A recorder keeping up to `maximumEntries` exchanges, bodies up to `maximumBodyBytes`.
    public init(maximumEntries: Int = 1000, maximumBodyBytes: Int = 1 << 20) {
        self.maximumEntries = max(0, maximumEntries)
        self.maximumBodyBytes = max(0, maximumBodyBytes)
    }

    /// The exchanges recorded so far, oldest first.
    public var har: HAR { HAR(entries: entries.withLock { $0.kept }) }

    /// The exchanges not kept because `maximumEntries` were.
    public var droppedEntries: Int { entries.withLock { $0.dropped } }

    /// Forgets every recorded exchange.
    public func removeAll() {
        entries.withLock { $0 = ([], 0) }
    }

    public func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        try await recording(request, send: { () async throws(CatenaError) -> APIResponse in try await next.load(request) }) {
            ($0, $0.body, nil)
        }
    }

    public func stream(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> StreamedResponse {
        try await recording(request, send: { () async throws(CatenaError) -> StreamedResponse in try await next.stream(request) }) {
            ($0.head, nil, "streamed: the body is not recorded")
        }
    }

    /// Sends `request` with `send` and records the exchange: what `describe` makes of
    /// the answer (the response, its body if it has one, a comment), or the failure.
    private func recording<Answer>(
        _ request: APIRequest, send: () async throws(CatenaError) -> Answer,
        describe: (Answer) -> (response: APIResponse, body: Data?, comment: String?)
    ) async throws(CatenaError) -> Answer {
        let started = Date(), clock = ContinuousClock.now
        let sentBody = await recordableBody(of: request)
        do {
            let answer = try await send()
            let (response, body, comment) = describe(answer)
            record(
                request, sentBody, started: started, elapsed: ContinuousClock.now - clock,
                response: response, body: body, comment: comment)
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
        response: APIResponse?, body: Data?, comment: String?, error: CatenaError.Code? = nil
    ) {
        let redaction = Redaction.effective(for: request)
        let requestType = request.headerFields[.contentType] ?? request.body.contentType ?? "application/octet-stream"
        var redactor = HARBodyRedactor(redaction: redaction, limit: maximumBodyBytes)
        redactor.learnSecrets(of: request, body: sentBody, contentType: requestType)
        let postData = sentBody.map { data in
            let (text, encoding, redacted) = redactor.text(of: data, contentType: requestType)
            return HAR.PostData(
                mimeType: requestType, text: text ?? "", _encoding: encoding,
                comment: redacted ? HARBodyRedactor.redactedComment : text == nil ? "over the recording limit, or not redactable" : nil)
        }
        let harRequest = HAR.Request(
            method: request.method.rawValue, url: request.redactedURLString, httpVersion: "unknown", cookies: [],
            headers: Self.headers(request.headerFields, redactor),
            queryString: request.queryItems.map { item in
                HAR.NameValue(name: item.name, value: redaction.isSecretQueryItem(item.name) ? Redaction.placeholder : item.value ?? "")
            },
            postData: postData, headersSize: -1, bodySize: sentBody?.count ?? (request.body.isEmpty ? 0 : -1))

        let responseType = response?.headerFields[.contentType] ?? "application/octet-stream"
        var content = HAR.Content(size: body?.count ?? -1, mimeType: responseType, text: nil, encoding: nil, comment: comment)
        if let body, !body.isEmpty {
            let (text, encoding, redacted) = redactor.text(of: body, contentType: responseType)
            content.text = text
            content.encoding = encoding
            if text == nil { content.comment = "over the recording limit of \(maximumBodyBytes) bytes, or not redactable" }
            if redacted { content.comment = HARBodyRedactor.redactedComment }
        }
        let harResponse = HAR.Response(
            status: response?.status.code ?? 0, statusText: response?.status.reasonPhrase ?? "", httpVersion: "unknown",
            cookies: [], headers: response.map { Self.headers($0.headerFields, redactor) } ?? [], content: content,
            redirectURL: (response?.headerFields[.location]).map { redactor.scrub(redaction.redact(urlString: $0)) } ?? "", headersSize: -1,
            bodySize: body?.count ?? -1)

        let timing = response?.timing
        let wait = timing.map { Self.milliseconds($0.timeToFirstByte) } ?? Self.milliseconds(elapsed)
        let receive = timing?.bodyDuration.map(Self.milliseconds) ?? 0
        let entry = HAR.Entry(
            startedDateTime: Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(started),
            time: wait + receive, request: harRequest, response: harResponse, cache: HAR.Cache(),
            timings: HAR.Timings(blocked: -1, dns: -1, connect: -1, ssl: -1, send: 0, wait: wait, receive: receive),
            _error: error?.rawValue)
        entries.withLock { entries in
            if entries.kept.count < maximumEntries {
                entries.kept.append(entry)
            } else {
                entries.dropped += 1
            }
        }
    }

    private static func headers(_ fields: HTTPFields, _ redactor: HARBodyRedactor) -> [HAR.NameValue] {
        fields.map { field in
            let value =
                if redactor.redaction.isSecretHeader(field.name) {
                    Redaction.placeholder
                } else if field.name == .location || field.name == .contentLocation {
                    // A URL the server made may carry a secret of its own (?token=…).
                    redactor.scrub(redactor.redaction.redact(urlString: field.value))
                } else {
                    redactor.scrub(field.value)
                }
            return HAR.NameValue(name: field.name.rawName, value: value)
        }
    }

    private static func milliseconds(_ duration: Duration) -> Double {
        // Microsecond precision is plenty for a viewer.
        ((Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15) * 1000).rounded() / 1000
    }
}

/// A body as HAR text: secret fields of form and JSON bodies redacted, other text as
/// it is, binary as base64; nil when over the limit, or when a form or JSON body could
/// not be read to redact it (it is then left out rather than recorded with its secrets).
struct HARBodyRedactor {
    let redaction: Redaction
    let limit: Int
    /// JSON keys named like a secret header ("authorization", "x-api-key"): an echo
    /// of the request's headers must not carry them into the file.
    let secretHeaderKeys: Set<String>

    /// The secret values the request carried, replaced wherever they appear in recorded
    /// text (a server that echoes the request must not write them into the file).
    private(set) var secretValues: [String] = []

    init(redaction: Redaction, limit: Int) {
        self.redaction = redaction
        self.limit = limit
        self.secretHeaderKeys = Set(redaction.headerNames.map { $0.canonicalName })
    }

    /// Collects the values of `request`'s secret headers (and the credential after a
    /// scheme such as "Bearer"), secret query items, and secret form or JSON fields.
    mutating func learnSecrets(of request: APIRequest, body: Data?, contentType: String) {
        var values: [String] = []
        for field in request.headerFields where redaction.isSecretHeader(field.name) {
            values.append(field.value)
            if let space = field.value.lastIndex(of: " ") { values.append(String(field.value[field.value.index(after: space)...])) }
        }
        for item in request.queryItems where redaction.isSecretQueryItem(item.name) {
            if let value = item.value { values.append(value) }
        }
        if let body, body.count <= limit {
            let type = contentType.lowercased()
            if type.contains("application/x-www-form-urlencoded"), let text = String(data: body, encoding: .utf8) {
                for pair in text.split(separator: "&") {
                    guard let equals = pair.firstIndex(of: "=") else { continue }
                    let decode = { (part: Substring) in part.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(part) }
                    if redaction.isSecretQueryItem(decode(pair[..<equals])) {
                        values.append(String(pair[pair.index(after: equals)...]))
                        values.append(decode(pair[pair.index(after: equals)...]))
                    }
                }
            } else if type.contains("json"), let object = try? JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed]) {
                collectJSONSecrets(object, depth: 0, into: &values)
            }
        }
        // Four characters at least: replacing "1" everywhere would garble the record.
        secretValues = Array(Set(values.filter { $0.count >= 4 && $0 != Redaction.placeholder })).sorted { $0.count > $1.count }
    }

    private func collectJSONSecrets(_ value: Any, depth: Int, into values: inout [String]) {
        guard depth < 64 else { return }
        if let object = value as? [String: Any] {
            for (key, member) in object {
                if redaction.isSecretQueryItem(key) || secretHeaderKeys.contains(key.lowercased()), let text = member as? String {
                    values.append(text)
                } else {
                    collectJSONSecrets(member, depth: depth + 1, into: &values)
                }
            }
        } else if let array = value as? [Any] {
            for member in array { collectJSONSecrets(member, depth: depth + 1, into: &values) }
        }
    }

    /// `text` with every secret value of the request replaced.
    func scrub(_ text: String) -> String {
        secretValues.reduce(text) { $0.replacingOccurrences(of: $1, with: Redaction.placeholder) }
    }

    /// The body as HAR text, and whether anything in it was redacted (every other byte
    /// is as received).
    func text(of data: Data, contentType: String) -> (text: String?, encoding: String?, redacted: Bool) {
        let (text, encoding) = plainText(of: data, contentType: contentType)
        guard let text, encoding == nil else { return (text, encoding, false) }
        let scrubbed = scrub(text)
        return (scrubbed, nil, !scrubbed.utf8.elementsEqual(data))
    }

    /// The comment on a body whose secrets were replaced.
    static let redactedComment = "redacted: secret values replaced with \(Redaction.placeholder); every other byte as sent"

    private func plainText(of data: Data, contentType: String) -> (text: String?, encoding: String?) {
        guard data.count <= limit else { return (nil, nil) }
        let type = contentType.lowercased()
        if type.contains("application/x-www-form-urlencoded") {
            guard let text = String(data: data, encoding: .utf8) else { return (nil, nil) }
            return (redactForm(text), nil)
        }
        if type.contains("json") {
            // Redacted in place: every byte but the secret values' as received.
            let bytes = Array(data)
            guard (try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])) != nil,
                let spans = JSONSecretSpans.find(
                    in: bytes,
                    isSecret: { name in
                        redaction.isSecretQueryItem(name) || secretHeaderKeys.contains(name.lowercased())
                    },
                    isSecretText: { text in secretValues.contains { text.contains($0) } }),
                let text = String(
                    bytes: JSONSecretSpans.replacing(spans, in: bytes, with: Array("\"\(Redaction.placeholder)\"".utf8)), encoding: .utf8)
            else { return (nil, nil) }
            return (text, nil)
        }
        if let text = String(data: data, encoding: .utf8) { return (text, nil) }
        return (data.base64EncodedString(), "base64")
    }

    private func redactForm(_ text: String) -> String {
        text.split(separator: "&", omittingEmptySubsequences: false).map { pair in
            guard let equals = pair.firstIndex(of: "=") else { return String(pair) }
            let name = pair[..<equals].replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(pair[..<equals])
            return redaction.isSecretQueryItem(name) ? pair[...equals] + Redaction.placeholder : String(pair)
        }.joined(separator: "&")
    }
}
