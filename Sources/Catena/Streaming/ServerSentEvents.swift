package import Foundation

/// One server-sent event (WHATWG HTML, "Server-sent events", event stream
/// interpretation).
public struct ServerSentEvent: Sendable, Hashable {
    /// The event type: the `event` field, "message" when there was none.
    public var event: String
    /// The `data` lines, joined with "\n".
    public var data: String
    /// The last event ID when the event was dispatched: the latest `id` field so far
    /// (it carries over from event to event), "" when there was none.
    public var lastEventID: String
    /// The reconnection time the stream asked for with its latest `retry` field up to
    /// this event, if any.
    public var retry: Duration?

    public init(event: String = "message", data: String, lastEventID: String = "", retry: Duration? = nil) {
        self.event = event
        self.data = data
        self.lastEventID = lastEventID
        self.retry = retry
    }
}

/// Reads `text/event-stream` bytes into events, as the WHATWG spec says: LF, CR and
/// CRLF line ends (also split across chunks), one leading BOM dropped, `:` comments,
/// a field without a colon taken as an empty value, one space after the colon
/// dropped, `data` lines joined with "\n", `id` kept across events (ignored when it
/// contains NUL), `retry` only as ASCII digits, a block without data not dispatched,
/// and an unfinished event at the end discarded.
///
/// Written here rather than taken from swift-openapi-runtime or mattt/EventSource:
/// neither bounds the memory a server can make it use, the first drops fields
/// without a colon and does not keep the last event ID, and the second dispatches an
/// unfinished event at the end and needs URLSession.bytes, which Linux lacks.
///
/// Bounded: a line over `maxLineBytes` or an event whose data exceeds `maxEventBytes`
/// fails with ``CatenaError/Code/invalidResponse``.
package struct ServerSentEventParser: Sendable {
    let maxLineBytes: Int
    let maxEventBytes: Int

    private var line: [UInt8] = []
    private var pendingCR = false
    private var atStart = true
    private var bomChecked = 0
    private var data: [UInt8] = []
    private var hasData = false
    private var eventType: String?
    /// The `id` field last read; it becomes the last event ID at the next blank line.
    private var idBuffer = ""
    /// The longest event ID kept: 4 KiB. A longer one is ignored as the spec ignores an ID
    /// with NUL, so `Last-Event-ID` never carries more.
    package static let maxEventIDBytes = 4096
    /// The last event ID string: committed at each blank line, so an event cut off
    /// mid-way never moves it (a reconnection asks again from the one before).
    private(set) var lastEventID = ""
    /// The reconnection time the latest valid `retry` field asked for (it applies at
    /// once, not at the next event).
    private(set) var retry: Duration?

    /// A parser whose last event ID starts as `lastEventID`: a reconnected stream goes
    /// on from the one before (the ID belongs to the event source, not the connection).
    package init(maxLineBytes: Int = 1 << 20, maxEventBytes: Int = 4 << 20, lastEventID: String = "") {
        self.maxLineBytes = maxLineBytes
        self.maxEventBytes = maxEventBytes
        self.lastEventID = lastEventID
        self.idBuffer = lastEventID
    }

    private static let bom: [UInt8] = [0xEF, 0xBB, 0xBF]

    /// The events completed by `bytes`, and the error that stopped the reading, if
    /// any (the events before it are still returned).
    package mutating func read(_ bytes: some Sequence<UInt8>, request: APIRequest) -> ([ServerSentEvent], CatenaError?) {
        events(in: bytes, request: request)
    }

    /// ``read(_:request:)`` for a chunk as the transports hand it over. A concrete type,
    /// so that a caller in another module runs the code specialized here, as the event
    /// stream does, and not the generic one, which allocates many times more per event.
    package mutating func read(_ bytes: Data, request: APIRequest) -> ([ServerSentEvent], CatenaError?) {
        events(in: bytes, request: request)
    }

    private mutating func events(in bytes: some Sequence<UInt8>, request: APIRequest) -> ([ServerSentEvent], CatenaError?) {
        var events: [ServerSentEvent] = []
        do {
            try feed(bytes, into: &events, request: request)
            return (events, nil)
        } catch {
            return (events, error)  // an inout keeps what was appended before the throw
        }
    }

    /// The events completed by `bytes`.
    mutating func push(_ bytes: some Sequence<UInt8>, request: APIRequest) throws(CatenaError) -> [ServerSentEvent] {
        var events: [ServerSentEvent] = []
        try feed(bytes, into: &events, request: request)
        return events
    }

    private mutating func feed(_ bytes: some Sequence<UInt8>, into events: inout [ServerSentEvent], request: APIRequest) throws(CatenaError) {
        for byte in bytes {
            if atStart {
                // Hold back what could be the BOM until it is known not to be.
                if byte == Self.bom[bomChecked] {
                    bomChecked += 1
                    if bomChecked == Self.bom.count { atStart = false }
                    continue
                }
                atStart = false
                let held = Self.bom.prefix(bomChecked)
                bomChecked = 0
                for heldByte in held { try take(heldByte, into: &events, request: request) }
            }
            try take(byte, into: &events, request: request)
        }
    }

    private mutating func take(_ byte: UInt8, into events: inout [ServerSentEvent], request: APIRequest) throws(CatenaError) {
        switch byte {
        case UInt8(ascii: "\n"):
            if pendingCR {
                pendingCR = false  // the LF of a CRLF
                return
            }
            try endLine(into: &events, request: request)
        case UInt8(ascii: "\r"):
            pendingCR = true
            try endLine(into: &events, request: request)
        default:
            pendingCR = false
            guard line.count < maxLineBytes else {
                throw CatenaError(.invalidResponse, request: request, detail: "an event stream line is longer than \(maxLineBytes) bytes")
            }
            line.append(byte)
        }
    }

    private mutating func endLine(into events: inout [ServerSentEvent], request: APIRequest) throws(CatenaError) {
        defer { line.removeAll(keepingCapacity: true) }
        if line.isEmpty {
            dispatch(into: &events)
            return
        }
        if line.first == UInt8(ascii: ":") { return }  // a comment
        let colon = line.firstIndex(of: UInt8(ascii: ":"))
        let name = line[..<(colon ?? line.endIndex)]
        var value = colon.map { line[line.index(after: $0)...] } ?? []
        if value.first == UInt8(ascii: " ") { value = value.dropFirst() }
        switch String(decoding: name, as: UTF8.self) {
        case "event":
            eventType = String(decoding: value, as: UTF8.self)
        case "data":
            guard data.count + value.count + 1 <= maxEventBytes else {
                throw CatenaError(.invalidResponse, request: request, detail: "an event's data is larger than \(maxEventBytes) bytes")
            }
            data.append(contentsOf: value)
            data.append(UInt8(ascii: "\n"))
            hasData = true
        case "id":
            // An id with NUL is ignored (WHATWG); so is one over `maxEventIDBytes`, which
            // would go back to the server as a header on every reconnection.
            if !value.contains(0), value.count <= Self.maxEventIDBytes { idBuffer = String(decoding: value, as: UTF8.self) }
        case "retry":
            if !value.isEmpty, value.count <= 12, value.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                let milliseconds = Int64(String(decoding: value, as: UTF8.self))
            {
                retry = .milliseconds(milliseconds)
            }
        default:
            break  // unknown fields are ignored
        }
    }

    private mutating func dispatch(into events: inout [ServerSentEvent]) {
        lastEventID = idBuffer
        defer {
            data.removeAll(keepingCapacity: true)
            hasData = false
            eventType = nil
        }
        guard hasData else { return }
        data.removeLast()  // the "\n" after the last data line
        let type = eventType.flatMap { $0.isEmpty ? nil : $0 } ?? "message"
        events.append(ServerSentEvent(event: type, data: String(decoding: data, as: UTF8.self), lastEventID: lastEventID, retry: retry))
    }
}

/// The events of an event-stream body, as they arrive.
public struct ServerSentEvents: AsyncSequence, Sendable {
    public typealias Element = ServerSentEvent
    public typealias Failure = CatenaError

    let body: ResponseBody
    let request: APIRequest
    let maxEventBytes: Int
    var lastEventID = ""

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(
            body: body.makeAsyncIterator(), request: request,
            parser: ServerSentEventParser(maxLineBytes: maxEventBytes, maxEventBytes: maxEventBytes, lastEventID: lastEventID))
    }

    /// Reads events in order.
    public struct AsyncIterator: AsyncIteratorProtocol, Sendable {
        var body: ResponseBody.AsyncIterator
        let request: APIRequest
        var parser: ServerSentEventParser
        var ready: [ServerSentEvent] = []
        var index = 0
        var pendingError: CatenaError?
        var failed = false

        /// The last event ID so far (committed at each blank line), for a
        /// reconnection's `Last-Event-ID`.
        public var lastEventID: String { parser.lastEventID }

        /// The reconnection time the stream's latest `retry` field asked for, if any.
        public var reconnectionTime: Duration? { parser.retry }

        public mutating func next() async throws(CatenaError) -> ServerSentEvent? {
            while index == ready.count {
                if failed { return nil }
                if let error = pendingError {
                    failed = true
                    throw error  // after the events completed before it
                }
                guard let chunk = try await body.next() else { return nil }  // an unfinished event is discarded
                (ready, pendingError) = parser.read(chunk, request: request)
                index = 0
            }
            defer { index += 1 }
            return ready[index]
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(CatenaError) -> ServerSentEvent? {
            try await next()
        }
    }
}

extension StreamedResponse {
    /// The body read as server-sent events. An event (or line) over `maxEventBytes`
    /// fails with ``CatenaError/Code/invalidResponse``.
    public func serverSentEvents(maxEventBytes: Int = 4 << 20) -> ServerSentEvents {
        ServerSentEvents(body: body, request: request, maxEventBytes: maxEventBytes)
    }
}
