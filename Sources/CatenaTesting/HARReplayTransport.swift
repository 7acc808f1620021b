public import Catena
public import Foundation
import HTTPTypes

/// A transport that answers from a HAR archive instead of the network: for tests that
/// replay a session recorded once with ``HARRecorder`` (or exported from a browser).
///
/// A request is answered by the entries with its method and URL, in the order they were
/// recorded; when they are used up, the last one answers again. Entries with the URL as
/// sent come first; without one, URLs are compared with secret query values redacted,
/// as the recorder writes them, so a file recorded by Catena and one exported from a
/// browser (where the values are as sent) both match.
/// A request with no entry fails with `CatenaError/Code/invalidRequest` naming the
/// method and (redacted) URL, and an entry recorded as a failure fails again with its
/// code. Bodies come back as recorded, so redacted values stay redacted; since a
/// recorded body is the decoded one, the recorded `Content-Encoding`, `Content-Length`
/// and `Transfer-Encoding` are not replayed.
///
/// Files saved by Chrome's and Firefox's developer tools load as they are: missing
/// optional fields, sizes of -1, extra fields and several pages (see ``HAR``).
public final class HARReplayTransport: HTTPLoader {
    private struct Key: Hashable { let method: String, url: String }
    private let entries: [(method: String, url: String, entry: HAR.Entry)]
    private let served = Locked<[Key: Int]>([:])
    private let requests = Locked<[APIRequest]>([])

    /// A transport answering from `har`'s entries.
    public init(_ har: HAR) {
        // A browser records a WebSocket's URL as ws or wss: Catena sends its upgrade as http or https.
        entries = har.log.entries.map { entry in
            var url = entry.request.url
            if url.lowercased().hasPrefix("ws://") { url = "http://" + url.dropFirst(5) }
            if url.lowercased().hasPrefix("wss://") { url = "https://" + url.dropFirst(6) }
            return (entry.request.method.uppercased(), url, entry)
        }
    }

    /// A transport answering from the HAR file at `url`.
    ///
    /// - Throws: ``HARError`` when the file cannot be read or is no HAR.
    public convenience init(contentsOf url: URL) throws(HARError) {
        self.init(try HAR(contentsOf: url))
    }

    /// The requests answered or refused so far, in order.
    public var receivedRequests: [APIRequest] { requests.withLock { $0 } }

    public func load(_ request: APIRequest) async throws(CatenaError) -> APIResponse {
        try await answer(request).response
    }

    /// A WebSocket's upgrade recorded with its messages (by ``HARRecorder``, or a
    /// browser) opens a socket that replays them: the messages received before the
    /// first one sent arrive at once, and each message the client sends is answered by
    /// those that followed it in the recording. Anything else is answered as by `load`.
    public func stream(_ request: APIRequest) async throws(CatenaError) -> StreamedResponse {
        let (response, entry) = try await answer(request)
        if let handoff = request[option: WebSocketUpgrade.self], response.status.code == 101 {
            var steps: [WebSocketScript.Step] = []
            let messages = entry._webSocketMessages ?? []
            guard messages.count <= HARRecorder.maximumWebSocketMessages else {
                throw CatenaError(
                    .invalidResponse, request: request,
                    detail: "the HAR entry holds \(messages.count) WebSocket messages, over the \(HARRecorder.maximumWebSocketMessages) a replay takes")
            }
            for (index, message) in messages.enumerated() {
                switch (message.type, message.opcode) {
                case ("send", 1), ("send", 2):
                    steps.append(.send)
                case ("receive", 1):
                    steps.append(.receive(.text(message.data)))
                case ("receive", 2):
                    guard message._omitted == nil, let data = Data(base64Encoded: message.data) else {
                        throw CatenaError(
                            .invalidResponse, request: request,
                            detail:
                                "WebSocket message \(index + 1) of the HAR entry is binary and was left out or is not base64: record it with recordsUnreadableBodies: true"
                        )
                    }
                    steps.append(.receive(.binary(data)))
                default:
                    throw CatenaError(
                        .invalidResponse, request: request,
                        detail:
                            "WebSocket message \(index + 1) of the HAR entry has type \"\(ProblemDetails.printable(message.type, limit: 20))\" and opcode \(message.opcode): a replay takes send and receive, text (1) and binary (2)"
                    )
                }
            }
            await handoff.deliver(WebSocketScript(steps).frames())
        }
        return StreamedResponse(complete: response)
    }

    private func answer(_ request: APIRequest) async throws(CatenaError) -> (response: APIResponse, entry: HAR.Entry) {
        requests.withLock { $0.append(request) }
        guard !Task.isCancelled else { throw CatenaError(.cancelled, request: request) }
        // The URL as sent first (a browser's file keeps `?code=FR` and `?code=US` apart,
        // though `code` is a secret name); then compared with secret values redacted, as
        // Catena records them.
        let method = request.method.rawValue
        let exact = request.assembleURL(redacting: nil)
        var key = Key(method: method, url: exact)
        var entries = self.entries.filter { $0.method == method && $0.url == exact }.map(\.entry)
        let redacted = request.redactedURLString
        if entries.isEmpty {
            let redaction = Redaction.effective(for: request)
            key = Key(method: method, url: "redacted " + redacted)
            entries = self.entries.filter { candidate in
                candidate.method == method && (candidate.url == redacted || redaction.redact(urlString: candidate.url) == redacted)
            }.map(\.entry)
        }
        guard !entries.isEmpty else {
            throw CatenaError(
                .invalidRequest, request: request,
                detail: "the HAR archive has no answer for \(method) \(redacted) (\(self.entries.count) entries recorded)")
        }
        let index = served.withLock { served in
            let next = served[key, default: 0]
            served[key] = next + 1
            return min(next, entries.count - 1)
        }
        let entry = entries[index]
        if let code = entry._error, entry.response.status == 0 {
            throw CatenaError(
                CatenaError.Code(rawValue: code), request: request,
                detail: "replayed from the HAR archive")
        }
        guard (100...999).contains(entry.response.status) else {
            throw CatenaError(.invalidResponse, request: request, detail: "the HAR entry's status \(entry.response.status) is not an HTTP status")
        }
        var fields = HTTPFields()
        for header in entry.response.headers {
            // Pseudo-header names (":status", as some exporters keep them) do not parse.
            guard let name = HTTPField.Name(header.name), ![.contentEncoding, .contentLength, .transferEncoding].contains(name) else { continue }
            fields.append(HTTPField(name: name, value: header.value))
        }
        let body: Data
        // HAR names the encoding without saying its case; tools write "base64" and "BASE64".
        switch (entry.response.content.text, entry.response.content.encoding?.lowercased()) {
        case (nil, _) where entry.response.content.size > 0 || entry.response.content.comment?.hasPrefix("not recorded") == true:
            // A body the recording left out replays as no body at all: a test would pass
            // on data the server never sent.
            throw CatenaError(
                .invalidResponse, request: request,
                detail:
                    "the HAR entry for \(method) \(redacted) left its \(entry.response.content.size > 0 ? "\(entry.response.content.size)-byte " : "")body out (\(entry.response.content.comment.map { ProblemDetails.printable($0, limit: 120) } ?? "no text")): record it again with HARRecorder(maximumBodyBytes:) large enough, or recordsUnreadableBodies: true for a binary body"
            )
        case (nil, _): body = Data()
        case (let text?, "base64"?):
            guard let decoded = Data(base64Encoded: text, options: .ignoreUnknownCharacters) else {
                throw CatenaError(.invalidResponse, request: request, detail: "the HAR entry's base64 body does not decode")
            }
            body = decoded
        case (let text?, _): body = Data(text.utf8)
        }
        let response = APIResponse(
            status: HTTPResponse.Status(code: entry.response.status, reasonPhrase: entry.response.statusText),
            headerFields: fields, body: body, request: request)
        if let code = entry._error {
            // A failure that came with a response (an unacceptable status, say).
            throw CatenaError(
                CatenaError.Code(rawValue: code), request: request, response: response,
                detail: "replayed from the HAR archive")
        }
        return (response, entry)
    }
}
