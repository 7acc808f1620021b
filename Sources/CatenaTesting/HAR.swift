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
        /// Catena's error code when the exchange failed without a response (HAR's
        /// custom fields start with an underscore).
        public var _error: String?
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
    }

    public struct Content: Codable, Sendable, Equatable {
        /// The body's length in bytes (the whole body, also when `text` holds less).
        public var size: Int
        public var mimeType: String
        public var text: String?
        /// "base64" when `text` is base64.
        public var encoding: String?
        /// Why `text` is missing or short: "streamed", "truncated".
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

    /// Reads an archive from a HAR file.
    ///
    /// - Throws: ``HARError`` saying what is wrong with the file.
    public init(contentsOf url: URL) throws(HARError) {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw HARError("cannot read \(url.path): \(error.localizedDescription)")
        }
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

    /// Writes the archive to `url`.
    public func write(to url: URL) throws {
        try encoded().write(to: url, options: .atomic)
    }
}

/// A HAR file that cannot be read, or a request a replay has no answer for.
public struct HARError: Error, Sendable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
