public import Foundation

/// Splits a byte stream into records: JSON Lines (one value per line, LF or CRLF,
/// blank lines skipped but counted) or JSON text sequences (RFC 7464: each record
/// starts with RS, 0x1E). A record's number is its line number (JSON Lines) or its
/// place (sequences). A record over `maxRecordBytes` fails with
/// ``CatenaError/Code/invalidResponse``.
struct RecordSplitter: Sendable {
    enum Format: Sendable { case lines, textSequence }

    let format: Format
    let maxRecordBytes: Int
    private var record: [UInt8] = []
    private(set) var number = 0

    init(format: Format, maxRecordBytes: Int) {
        self.format = format
        self.maxRecordBytes = maxRecordBytes
    }

    /// The records completed by `bytes`, each with its number (from 1), and the error
    /// that stopped the reading, if any (the records before it are still returned).
    mutating func read(_ bytes: some Sequence<UInt8>, request: APIRequest) -> ([(number: Int, bytes: [UInt8])], CatenaError?) {
        var records: [(number: Int, bytes: [UInt8])] = []
        let separator: UInt8 = format == .lines ? UInt8(ascii: "\n") : 0x1E
        for byte in bytes {
            if byte == separator {
                if let done = take() { records.append(done) }
                continue
            }
            guard record.count < maxRecordBytes else {
                let error = CatenaError(
                    .invalidResponse, request: request,
                    detail: "record \(number + 1) of the stream is longer than \(maxRecordBytes) bytes")
                return (records, error)
            }
            record.append(byte)
        }
        return (records, nil)
    }

    /// ``read(_:request:)`` for tests: throws instead of returning the error.
    mutating func push(_ bytes: some Sequence<UInt8>, request: APIRequest) throws(CatenaError) -> [(number: Int, bytes: [UInt8])] {
        let (records, error) = read(bytes, request: request)
        if let error { throw error }
        return records
    }

    /// The last record, when the stream ends without a separator after it.
    mutating func finish() -> (number: Int, bytes: [UInt8])? {
        take()
    }

    private mutating func take() -> (number: Int, bytes: [UInt8])? {
        // JSON Lines count every line, blank ones too; sequences count records.
        if format == .lines { number += 1 }
        defer { record.removeAll(keepingCapacity: true) }
        var bytes = record[...]
        while let last = bytes.last, last == UInt8(ascii: "\r") || last == UInt8(ascii: "\n") || last == UInt8(ascii: " ") || last == UInt8(ascii: "\t") {
            bytes = bytes.dropLast()
        }
        while let first = bytes.first, first == UInt8(ascii: " ") || first == UInt8(ascii: "\t") || first == UInt8(ascii: "\n") || first == UInt8(ascii: "\r") {
            bytes = bytes.dropFirst()
        }
        guard !bytes.isEmpty else { return nil }
        if format == .textSequence { number += 1 }
        return (number, Array(bytes))
    }
}

/// Values decoded one by one from a JSON Lines or JSON text sequence body, as they
/// arrive. A value that does not decode fails with ``CatenaError/Code/decodingFailed``
/// naming its record (line) number.
public struct JSONRecords<Value: Decodable & Sendable>: AsyncSequence, Sendable {
    public typealias Element = Value
    public typealias Failure = CatenaError

    let body: ResponseBody
    let request: APIRequest
    let format: RecordSplitter.Format
    let maxRecordBytes: Int
    let makeDecoder: @Sendable () -> JSONDecoder

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(
            body: body.makeAsyncIterator(), request: request,
            splitter: RecordSplitter(format: format, maxRecordBytes: maxRecordBytes), decoder: makeDecoder())
    }

    /// Decodes values in order.
    public struct AsyncIterator: AsyncIteratorProtocol, Sendable {
        var body: ResponseBody.AsyncIterator
        let request: APIRequest
        var splitter: RecordSplitter
        let decoder: JSONDecoder
        var ready: [(number: Int, bytes: [UInt8])] = []
        var index = 0
        var ended = false
        var pendingError: CatenaError?

        public mutating func next() async throws(CatenaError) -> Value? {
            while index == ready.count {
                if ended { return nil }
                if let error = pendingError {
                    ended = true
                    throw error  // after the records completed before it
                }
                index = 0
                if let chunk = try await body.next() {
                    (ready, pendingError) = splitter.read(chunk, request: request)
                } else {
                    ended = true
                    ready = splitter.finish().map { [$0] } ?? []
                }
            }
            let record = ready[index]
            index += 1
            do {
                return try decoder.decode(Value.self, from: Data(record.bytes))
            } catch {
                throw CatenaError(
                    .decodingFailed, request: request, underlyingError: error,
                    detail: "record \(record.number) is not a \(Value.self): \(CatenaError.describe(error))")
            }
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(CatenaError) -> Value? {
            try await next()
        }
    }
}

extension StreamedResponse {
    /// The body read as JSON Lines (`application/jsonl`, NDJSON): one `Value` per line.
    public func jsonLines<Value: Decodable & Sendable>(
        of type: Value.Type = Value.self, maxLineBytes: Int = 1 << 20,
        decoder: @escaping @Sendable () -> JSONDecoder = { JSONDecoder() }
    ) -> JSONRecords<Value> {
        JSONRecords(body: body, request: request, format: .lines, maxRecordBytes: maxLineBytes, makeDecoder: decoder)
    }

    /// The body read as a JSON text sequence (RFC 7464, `application/json-seq`).
    public func jsonSequence<Value: Decodable & Sendable>(
        of type: Value.Type = Value.self, maxRecordBytes: Int = 1 << 20,
        decoder: @escaping @Sendable () -> JSONDecoder = { JSONDecoder() }
    ) -> JSONRecords<Value> {
        JSONRecords(body: body, request: request, format: .textSequence, maxRecordBytes: maxRecordBytes, makeDecoder: decoder)
    }
}
