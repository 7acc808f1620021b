public import Foundation

extension APIRequest {
    /// A request body that can be produced again for every attempt, so a retried
    /// request never sends an exhausted stream.
    ///
    /// Each kind brings its own `Content-Type`; transports add it unless the request
    /// already has one. Encoding happens when a transport sends the request, and a
    /// failure there surfaces as ``CatenaError/Code/invalidRequest`` naming the body.
    public struct Body: Sendable {
        /// The Content-Type this body sends, when it has one.
        public let contentType: String?
        /// A short name for the kind of body, used in error messages ("JSON", "form").
        public let kind: String
        private let produce: (@Sendable () throws -> Data)?
        /// For streamed bodies: the length, when known, and how to open the stream
        /// (once per attempt).
        package let stream: (length: Int64?, open: @Sendable () throws -> AsyncThrowingStream<Data, any Error>)?

        /// A body made by `produce`, called once per attempt.
        public init(kind: String, contentType: String?, produce: @escaping @Sendable () throws -> Data) {
            self.kind = kind
            self.contentType = contentType
            self.produce = produce
            self.stream = nil
        }

        private init(empty: Void) {
            kind = "empty"
            contentType = nil
            produce = nil
            stream = nil
        }

        /// A body read from a stream that `open` creates afresh for every attempt, so a
        /// retry never sends an exhausted stream. Transports that stream
        /// (AsyncHTTPClient) send it chunk by chunk; others collect it first.
        public static func stream(
            length: Int64?, contentType: String = "application/octet-stream",
            open: @escaping @Sendable () throws -> AsyncThrowingStream<Data, any Error>
        ) -> Body {
            Body(kind: "stream", contentType: contentType, length: length, open: open)
        }

        /// A file's contents, read in 64 KiB chunks when sent; the file is opened again
        /// for every attempt.
        public static func file(_ url: URL, contentType: String = "application/octet-stream") -> Body {
            let length = (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int).map(Int64.init)
            return Body(kind: "file \(url.lastPathComponent)", contentType: contentType, length: length) {
                let handle = try FileHandle(forReadingFrom: url)
                return AsyncThrowingStream {
                    guard let chunk = try handle.read(upToCount: 65_536), !chunk.isEmpty else {
                        try? handle.close()
                        return nil
                    }
                    return chunk
                }
            }
        }

        private init(kind: String, contentType: String?, length: Int64?, open: @escaping @Sendable () throws -> AsyncThrowingStream<Data, any Error>) {
            self.kind = kind
            self.contentType = contentType
            self.produce = nil
            self.stream = (length, open)
        }

        /// No body at all.
        public static let empty = Body(empty: ())

        /// Whether this is ``empty``.
        public var isEmpty: Bool { produce == nil && stream == nil }

        /// Bytes as given.
        public static func data(_ data: Data, contentType: String = "application/octet-stream") -> Body {
            Body(kind: "bytes", contentType: contentType) { data }
        }

        /// UTF-8 text.
        public static func text(_ text: String, contentType: String = "text/plain; charset=utf-8") -> Body {
            let data = Data(text.utf8)
            return Body(kind: "text", contentType: contentType) { data }
        }

        /// Any Encodable value as JSON, encoded with `encoder` for each attempt.
        public static func json<Value: Encodable & Sendable>(_ value: Value, encoder: JSONEncoder = JSONEncoder()) -> Body {
            Body(kind: "JSON (\(Value.self))", contentType: "application/json") { try encoder.encode(value) }
        }

        /// `application/x-www-form-urlencoded` fields, in order. Names and values are
        /// encoded as HTML forms do: unreserved characters stay, a space becomes "+",
        /// everything else is percent-encoded.
        public static func form(_ fields: [(name: String, value: String)]) -> Body {
            let encoded = fields.map { field in
                PercentEncoding.encode(field.name, allowing: PercentEncoding.queryComponent, spaceAsPlus: true) + "="
                    + PercentEncoding.encode(field.value, allowing: PercentEncoding.queryComponent, spaceAsPlus: true)
            }.joined(separator: "&")
            let data = Data(encoded.utf8)
            return Body(kind: "form", contentType: "application/x-www-form-urlencoded") { data }
        }

        /// `multipart/form-data` (RFC 7578) built from `form`'s parts.
        public static func multipart(_ form: MultipartForm) -> Body {
            Body(kind: "multipart", contentType: "multipart/form-data; boundary=\(form.boundary)") { form.encoded() }
        }

        /// The bytes of a body made in memory (not a stream or file), for descriptions.
        func producedData() throws -> Data? {
            try produce?()
        }

        /// Produces the bytes for one attempt; `nil` for an empty body. A streamed body
        /// is read whole (transports that stream open the stream afresh instead).
        public func makeData() async throws -> Data? {
            if let stream {
                var data = Data()
                for try await chunk in try stream.open() { data.append(chunk) }
                return data
            }
            return try produce?()
        }
    }
}

/// The parts of a `multipart/form-data` body (RFC 7578).
public struct MultipartForm: Sendable {
    /// One part: a named field, optionally a file with a name and a content type.
    public struct Part: Sendable {
        public var name: String
        public var filename: String?
        public var contentType: String?
        public var data: Data

        /// A part with raw bytes; give `filename` for a file upload.
        public init(name: String, filename: String? = nil, contentType: String? = nil, data: Data) {
            self.name = name
            self.filename = filename
            self.contentType = contentType
            self.data = data
        }

        /// A plain text field.
        public init(name: String, value: String) {
            self.init(name: name, data: Data(value.utf8))
        }
    }

    /// The parts in the order they are sent.
    public var parts: [Part]
    /// The boundary between parts. Chosen once, so every attempt sends identical bytes.
    public let boundary: String

    /// A form with these parts and a random boundary.
    public init(parts: [Part] = [], boundary: String = "catena-\(UUID().uuidString)") {
        self.parts = parts
        self.boundary = boundary
    }

    /// Appends a part.
    public mutating func append(_ part: Part) { parts.append(part) }

    func encoded() -> Data {
        var out = Data()
        for part in parts {
            var head = "--\(boundary)\r\nContent-Disposition: form-data; name=\"\(Self.quoted(part.name))\""
            if let filename = part.filename { head += "; filename=\"\(Self.quoted(filename))\"" }
            head += "\r\n"
            if let contentType = part.contentType ?? (part.filename != nil ? "application/octet-stream" : nil) {
                head += "Content-Type: \(Self.headerValue(contentType))\r\n"
            }
            out.append(contentsOf: Array((head + "\r\n").utf8))
            out.append(part.data)
            out.append(contentsOf: Array("\r\n".utf8))
        }
        out.append(contentsOf: Array("--\(boundary)--\r\n".utf8))
        return out
    }

    /// Escapes a name for a quoted header parameter as HTML forms do: `"` as %22 and
    /// line breaks as %0D / %0A, so a name can never end the header early; other
    /// control characters are dropped. Works on Unicode scalars: "\r\n" is a single
    /// `Character`, which a filter on characters lets through whole.
    static func quoted(_ value: String) -> String {
        var out = String.UnicodeScalarView()
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out.append(contentsOf: "%22".unicodeScalars)
            case "\r": out.append(contentsOf: "%0D".unicodeScalars)
            case "\n": out.append(contentsOf: "%0A".unicodeScalars)
            default: if !isControl(scalar) { out.append(scalar) }
            }
        }
        return String(out)
    }

    /// A header value with every control character removed (tab aside).
    static func headerValue(_ value: String) -> String {
        String(String.UnicodeScalarView(value.unicodeScalars.filter { $0 == "\t" || !isControl($0) }))
    }

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || scalar.value == 0x7F || (0x80...0x9F).contains(scalar.value) || scalar == "\u{2028}" || scalar == "\u{2029}"
    }
}
