public import Foundation

/// An HTTP Archive (HAR 1.2, the format browsers' developer tools export and import):
/// what ``HARRecorder`` writes and ``HARReplayTransport`` answers from. Only the parts
/// Catena fills are modelled; files from browsers decode too (unknown fields are
/// ignored, optional ones may be missing).
public struct HAR: Codable, Sendable, Equatable {
    public var log: Log

    public struct Log: Codable, Sendable, Equatable {
        public var version: String
        public var creator: Creator
        public var entries: [Entry]
    }

    public struct Creator: Codable, Sendable, Equatable {
        public var name: String
        public var version: String
    }

    /// One exchange.
    public struct Entry: Codable, Sendable, Equatable {
        /// When the request started, ISO 8601.
        public var startedDateTime: String
        /// The whole exchange in milliseconds.
        public var time: Double
        public var request: Request
        public var response: Response
        public var cache: Cache
        public var timings: Timings
        /// The address the exchange's connection reached, where the transport saw it.
        public var serverIPAddress: String? = nil
        /// The connection's identity: its local port, which its exchanges share.
        public var connection: String? = nil
        /// Catena's error code when the exchange failed without a response (HAR's
        /// custom fields start with an underscore).
        public var _error: String?
        /// "websocket" for a WebSocket's upgrade, as Chrome writes it.
        public var _resourceType: String? = nil
        /// A WebSocket's messages, in Chrome's form.
        public var _webSocketMessages: [WebSocketMessage]? = nil
    }

    /// A WebSocket message as Chrome's developer tools record it.
    public struct WebSocketMessage: Codable, Sendable, Equatable {
        /// "send" or "receive".
        public var type: String
        /// Seconds since 1970.
        public var time: Double
        /// 1 for text, 2 for binary.
        public var opcode: Int
        /// The text, or for binary the base64 of the bytes.
        public var data: String
        /// For a binary message left out of the recording: its size (Catena's field).
        public var _omitted: Int?

        public init(type: String, time: Double, opcode: Int, data: String, _omitted: Int? = nil) {
            self.type = type
            self.time = time
            self.opcode = opcode
            self.data = data
            self._omitted = _omitted
        }
    }

    public struct Request: Codable, Sendable, Equatable {
        public var method: String
        public var url: String
        public var httpVersion: String
        public var cookies: [NameValue]
        public var headers: [NameValue]
        public var queryString: [NameValue]
        public var postData: PostData?
        public var headersSize: Int
        public var bodySize: Int
    }

    public struct Response: Codable, Sendable, Equatable {
        public var status: Int
        public var statusText: String
        public var httpVersion: String
        public var cookies: [NameValue]
        public var headers: [NameValue]
        public var content: Content
        public var redirectURL: String
        public var headersSize: Int
        public var bodySize: Int
    }

    public struct NameValue: Codable, Sendable, Equatable {
        public var name: String
        public var value: String
    }

    public struct PostData: Codable, Sendable, Equatable {
        public var mimeType: String
        public var text: String
        /// "base64" when `text` is base64 (a Catena extension of the request side,
        /// which HAR 1.2 gives for responses only).
        public var _encoding: String?
        /// Why `text` differs from the bytes sent: "redacted: …", or missing.
        public var comment: String? = nil
    }

    public struct Content: Codable, Sendable, Equatable {
        /// The body's length in bytes (the whole body, also when `text` holds less).
        public var size: Int
        public var mimeType: String
        public var text: String?
        /// "base64" when `text` is base64.
        public var encoding: String?
        /// Why `text` is missing, short or not the bytes received: "streamed",
        /// "over the recording limit…", "redacted: …".
        public var comment: String?
    }

    public struct Cache: Codable, Sendable, Equatable {}

    /// Milliseconds; -1 where not known.
    public struct Timings: Codable, Sendable, Equatable {
        public var blocked: Double
        public var dns: Double
        public var connect: Double
        public var ssl: Double
        public var send: Double
        public var wait: Double
        public var receive: Double
    }

    /// An archive of `entries`, made by Catena.
    public init(entries: [Entry]) {
        log = Log(version: "1.2", creator: Creator(name: "Catena", version: "1"), entries: entries)
    }

    /// Reads an archive from a HAR file of at most `maximumBytes`.
    ///
    /// - Throws: ``HARError`` saying what is wrong with the file, also when it is larger
    ///   than `maximumBytes` (checked before it is read).
    public init(contentsOf url: URL, maximumBytes: Int = HAR.maximumFileBytes) throws(HARError) {
        let data = try HARFile.read(url, maximumBytes: maximumBytes)
        do {
            self = try JSONDecoder().decode(HAR.self, from: data)
        } catch {
            throw HARError("\(url.lastPathComponent) is not a HAR 1.2 file: \(error)")
        }
    }

    /// The archive as JSON, keys sorted, as HAR viewers read it.
    public func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(self)
    }

    /// Writes the archive to `url`, replacing the file at once (never half written),
    /// readable and writable by its owner only (mode 0600): it holds recorded calls.
    public func write(to url: URL) throws(HARError) {
        let data: Data
        do {
            data = try encoded()
        } catch {
            throw HARError("cannot encode the archive: \(error)")
        }
        // Under the lock `append` takes, so neither loses the other's write.
        try HARFile.withLock(url) { (_: Int32, _: Int) throws(HARError) in try HARFile.replace(url, with: data) }
    }
}

/// A HAR file that cannot be read, or a request a replay has no answer for.
public struct HARError: Error, Sendable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

// Decoding what browsers export: Chrome's and Firefox's developer tools leave out
// fields HAR 1.2 calls required (cookies, headersSize, cache, a timing or two), write
// -1 for sizes they do not know, and add fields of their own (`_initiator`, `pageref`,
// `log.pages`). Only what an answer cannot do without is required: a request's method
// and URL and a response's status; the rest falls back to HAR's "unknown" values.
extension KeyedDecodingContainer {
    fileprivate func value<T: Decodable>(_ key: Key, or fallback: @autoclosure () -> T) throws -> T {
        try decodeIfPresent(T.self, forKey: key) ?? fallback()
    }
}

extension HAR.Log {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        version = try c.value(.version, or: "1.2")
        creator = try c.value(.creator, or: HAR.Creator(name: "", version: ""))
        entries = try c.decode([HAR.Entry].self, forKey: .entries)
    }
}

extension HAR.Creator {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.value(.name, or: "")
        version = try c.value(.version, or: "")
    }
}

extension HAR.Entry {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        startedDateTime = try c.value(.startedDateTime, or: "")
        time = try c.value(.time, or: -1)
        request = try c.decode(HAR.Request.self, forKey: .request)
        response = try c.decode(HAR.Response.self, forKey: .response)
        cache = HAR.Cache()
        timings = try c.value(.timings, or: HAR.Timings(blocked: -1, dns: -1, connect: -1, ssl: -1, send: -1, wait: -1, receive: -1))
        serverIPAddress = try c.decodeIfPresent(String.self, forKey: .serverIPAddress)
        connection = try c.decodeIfPresent(String.self, forKey: .connection)
        _error = try c.decodeIfPresent(String.self, forKey: ._error)
        _resourceType = try c.decodeIfPresent(String.self, forKey: ._resourceType)
        _webSocketMessages = try c.decodeIfPresent([HAR.WebSocketMessage].self, forKey: ._webSocketMessages)
    }
}

extension HAR.Request {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        method = try c.decode(String.self, forKey: .method)
        url = try c.decode(String.self, forKey: .url)
        httpVersion = try c.value(.httpVersion, or: "")
        cookies = try c.value(.cookies, or: [])
        headers = try c.value(.headers, or: [])
        queryString = try c.value(.queryString, or: [])
        postData = try c.decodeIfPresent(HAR.PostData.self, forKey: .postData)
        headersSize = try c.value(.headersSize, or: -1)
        bodySize = try c.value(.bodySize, or: -1)
    }
}

extension HAR.Response {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        status = try c.decode(Int.self, forKey: .status)
        statusText = try c.value(.statusText, or: "")
        httpVersion = try c.value(.httpVersion, or: "")
        cookies = try c.value(.cookies, or: [])
        headers = try c.value(.headers, or: [])
        content = try c.value(.content, or: HAR.Content(size: -1, mimeType: "", text: nil, encoding: nil, comment: nil))
        redirectURL = try c.value(.redirectURL, or: "")
        headersSize = try c.value(.headersSize, or: -1)
        bodySize = try c.value(.bodySize, or: -1)
    }
}

extension HAR.NameValue {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decode(String.self, forKey: .name)
        value = try c.value(.value, or: "")
    }
}

extension HAR.PostData {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        mimeType = try c.value(.mimeType, or: "")
        text = try c.value(.text, or: "")
        _encoding = try c.decodeIfPresent(String.self, forKey: ._encoding)
        comment = try c.decodeIfPresent(String.self, forKey: .comment)
    }
}

extension HAR.Content {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        size = try c.value(.size, or: -1)
        mimeType = try c.value(.mimeType, or: "")
        text = try c.decodeIfPresent(String.self, forKey: .text)
        encoding = try c.decodeIfPresent(String.self, forKey: .encoding)
        comment = try c.decodeIfPresent(String.self, forKey: .comment)
    }
}

extension HAR.Timings {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        blocked = try c.value(.blocked, or: -1)
        dns = try c.value(.dns, or: -1)
        connect = try c.value(.connect, or: -1)
        ssl = try c.value(.ssl, or: -1)
        send = try c.value(.send, or: -1)
        wait = try c.value(.wait, or: -1)
        receive = try c.value(.receive, or: -1)
    }
}
