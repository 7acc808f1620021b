public import Foundation
import HTTPTypes

/// How a resumable download continues after an interruption.
public struct ResumePolicy: Sendable {
    /// How many times one call continues by itself after the connection failed
    /// mid-way (0: never; the bytes stay on disk for the next call).
    public var attempts: Int
    /// The wait before each of those continuations.
    public var delay: Duration

    public init(attempts: Int = 3, delay: Duration = .milliseconds(250)) {
        self.attempts = max(0, attempts)
        self.delay = delay
    }
}

extension Client {
    /// Downloads `endpoint`'s body to its destination, continuing from the bytes
    /// already on disk after an interruption, in this call or a later one.
    ///
    /// The bytes go to `.<name>.catena-part` beside the destination, the response's
    /// validator to `.<name>.catena-part.json`: a strong `ETag`, else `Last-Modified`.
    /// After a connection fails mid-way (or in a later call after a failure, a
    /// cancellation or a crash) the request is sent with `Range: bytes=<on disk>-` and
    /// `If-Range: <validator>`. A 206 whose `Content-Range` starts there is appended and
    /// progress counts on from the bytes on disk; a 200 (the file changed, or the
    /// server ignores ranges) starts over from byte 0; a 416 starts over too. A response
    /// without a validator is never resumed. Once complete, the file is renamed into
    /// place and the sidecars removed.
    ///
    /// The body streams to disk: memory stays within ``StreamWindow`` on
    /// AsyncHTTPClient, and within 16 windows (at least 4 MiB) on corelibs URLSession,
    /// which cannot pause a transfer. Run one download per destination at a time.
    public func resumableDownload<E: DownloadEndpoint>(_ endpoint: E, policy: ResumePolicy = ResumePolicy()) -> Transfer<URL> {
        let loader = self.loader
        return transfer { report throws(CatenaError) in
            let request = try endpoint.buildRequest()
            var download = ResumableFile(destination: endpoint.destination, request: request)
            var continued = 0
            while true {
                do throws(CatenaError) {
                    try await download.fetch(request, endpoint: endpoint, loader: loader, report: report)
                    return endpoint.destination
                } catch  where continued < policy.attempts && download.canResume && ResumableFile.isInterruption(error) {
                    continued += 1
                    do {
                        try await Task.sleep(for: policy.delay)
                    } catch {
                        throw CatenaError(.cancelled, request: request, detail: "cancelled while waiting to resume the download")
                    }
                }
            }
        }
    }
}

/// The partial file of a resumable download and what it needs to go on.
struct ResumableFile {
    /// What a later request needs to resume, and what a 206 must match: which request
    /// the bytes came from (a hash of its method and URL as built: a key in the query
    /// never reaches the disk), the origin that sent them, their validator and the
    /// full length when the server gave it.
    struct Record: Codable, Equatable {
        var request: String
        var origin: String
        var validator: String
        var total: Int64?
    }

    /// How one request ended.
    enum Outcome {
        /// The file is in place.
        case done
        /// A 206 ended where its Content-Range said, before the file's end (a server
        /// that caps range answers): ask for the rest at once.
        case partial
        /// What was on disk cannot be continued (the file changed, another server, a
        /// range that does not fit): it was removed; start from byte 0.
        case startOver
    }

    let destination: URL
    let requestKey: String
    let partial: URL
    let recordFile: URL

    init(destination: URL, request: APIRequest) {
        self.destination = destination
        requestKey = Self.hash(request.method.rawValue + " " + request.assembleURL(redacting: nil))
        let folder = destination.deletingLastPathComponent()
        partial = folder.appendingPathComponent(".\(destination.lastPathComponent).catena-part")
        recordFile = folder.appendingPathComponent(".\(destination.lastPathComponent).catena-part.json")
    }

    /// FNV-1a, 64 bits: stable across processes, unlike Hasher.
    private static func hash(_ text: String) -> String {
        var hash = FNV1a()
        hash.add(text.utf8)
        return String(hash.value, radix: 16)
    }

    /// `scheme://host:port` of the request as finally sent.
    private static func origin(of request: APIRequest) -> String {
        "\(request.scheme ?? "")://\(request.host ?? ""):\(request.port.map(String.init) ?? "")"
    }

    /// Whether bytes on disk can be resumed: they came from this URL with a validator.
    var canResume: Bool { resumePoint != nil }

    /// Where a range request can go on from, and the record it must match; nil when
    /// there are no bytes on disk, or no record that they came from this request.
    var resumePoint: (offset: Int64, record: Record)? {
        guard let data = FileManager.default.contents(atPath: recordFile.path),
            let record = try? JSONDecoder().decode(Record.self, from: data), record.request == requestKey, !record.validator.isEmpty,
            let size = try? FileManager.default.attributesOfItem(atPath: partial.path)[.size] as? NSNumber, size.int64Value > 0
        else { return nil }
        return (size.int64Value, record)
    }

    /// A failure after which the same request may go on where it stopped.
    static func isInterruption(_ error: CatenaError) -> Bool {
        [.connectionLost, .timedOut].contains(error.code) && !Task.isCancelled
    }

    /// Requests until the file is in place: from the bytes on disk when they can be
    /// resumed, at once again after a 206 the server cut short on purpose, and from 0
    /// (once) when what is on disk cannot be continued.
    mutating func fetch<E: Endpoint>(
        _ base: APIRequest, endpoint: E, loader: any HTTPLoader,
        report: @Sendable (TransferProgress) -> Void
    ) async throws(CatenaError) {
        var startedOver = false
        while true {
            switch try await fetchOnce(base, endpoint: endpoint, loader: loader, report: report) {
            case .done:
                return
            case .partial:
                continue
            case .startOver:
                guard !startedOver else {
                    throw CatenaError(.invalidResponse, request: base, detail: "the server's range answers did not fit the download, even from byte 0")
                }
                startedOver = true
            }
        }
    }

    /// One request.
    private func fetchOnce<E: Endpoint>(
        _ base: APIRequest, endpoint: E, loader: any HTTPLoader,
        report: @Sendable (TransferProgress) -> Void
    ) async throws(CatenaError) -> Outcome {
        var request = base
        // Byte ranges count the bytes as stored: a compressed transfer would count others.
        if request.headerFields[.acceptEncoding] == nil { request.headerFields[.acceptEncoding] = "identity" }
        let resume = resumePoint
        let offset = resume?.offset ?? 0
        if let resume {
            request.headerFields[.range] = "bytes=\(resume.offset)-"
            request.headerFields[HTTPField.Name("If-Range")!] = resume.record.validator
        } else {
            discard()
        }
        let response = try await loader.stream(request)
        let status = response.status.code
        if status == 416, offset > 0 {
            response.body.cancel()
            // `bytes */<length>`: when the length is what is on disk, the file was
            // complete and only the move into place was missed.
            let unsatisfied = response.headerFields[.contentRange].flatMap { value -> Int64? in
                guard value.hasPrefix("bytes */"), value.utf8.count <= 40 else { return nil }
                let digits = value.dropFirst(8)
                return digits.allSatisfy({ $0.isASCII && $0.isNumber }) ? Int64(digits) : nil
            }
            if unsatisfied == offset, resume?.record.total.map({ $0 == offset }) ?? true {
                try finish(request: response.request)
                report(TransferProgress(completed: offset, total: offset))
                return .done
            }
            discard()
            return .startOver
        }
        guard (200..<300).contains(status) else {
            let head = await Client.problem(of: response)
            do {
                try endpoint.validate(head)
            } catch let error as CatenaError {
                throw error
            } catch {
                throw CatenaError(.unacceptableStatus, request: response.request, response: head, underlyingError: error)
            }
            throw CatenaError(.unacceptableStatus, request: response.request, response: head)
        }
        do {
            try endpoint.validate(response.head)
        } catch {
            response.body.cancel()
            if let error = error as? CatenaError { throw error }
            throw CatenaError(.unacceptableStatus, request: response.request, response: response.head, underlyingError: error)
        }
        // A decoded body holds other bytes than the ranges count: never resumed.
        let encoded = response.headerFields[.contentEncoding].map { $0.lowercased() != "identity" } ?? false
        let strongETag = response.headerFields[.eTag].flatMap { $0.hasPrefix("W/") ? nil : $0 }
        let validator = strongETag ?? response.headerFields[.lastModified]
        if status == 206 {
            // If-Range is the server's promise, not a check: a proxy or server that
            // ignores it sends a range of another version. Everything must match.
            guard let resume, !encoded, let range = Self.contentRange(response.headerFields[.contentRange]),
                range.start == offset, let total = range.total,
                resume.record.total.map({ $0 == total }) ?? true,
                validator == resume.record.validator, Self.origin(of: response.request) == resume.record.origin
            else {
                response.body.cancel()
                discard()
                return .startOver
            }
            return try await write(response, from: offset, through: range.last, total: total, report: report)
        }
        discard()  // a whole new body: what was on disk is not part of it
        let total = encoded ? nil : response.headerFields[.contentLength].flatMap { Int64($0) }
        if !encoded, let validator {
            let record = Record(request: requestKey, origin: Self.origin(of: response.request), validator: validator, total: total)
            let data = try Self.encode(record, request: request)
            guard FileManager.default.createFile(atPath: recordFile.path, contents: data) else {
                response.body.cancel()
                throw CatenaError(.invalidRequest, request: request, detail: "cannot write beside \(destination.path)")
            }
        }
        return try await write(response, from: 0, through: nil, total: total, report: report)
    }

    /// Appends the body to the partial file from `start` (for a 206, up to byte
    /// `last`), then moves the file into place once it is whole.
    private func write(
        _ response: StreamedResponse, from start: Int64, through last: Int64?, total: Int64?,
        report: @Sendable (TransferProgress) -> Void
    ) async throws(CatenaError) -> Outcome {
        let request = response.request
        if start == 0 { _ = FileManager.default.createFile(atPath: partial.path, contents: nil) }
        guard let handle = try? FileHandle(forWritingTo: partial) else {
            response.body.cancel()
            throw CatenaError(.invalidRequest, request: request, detail: "cannot write the download to \(destination.path)")
        }
        defer { try? handle.close() }
        var written = start
        do {
            try handle.seek(toOffset: UInt64(start))
            try handle.truncate(atOffset: UInt64(start))
        } catch {
            response.body.cancel()
            throw CatenaError(.invalidRequest, request: request, underlyingError: error, detail: "cannot write the download to \(destination.path)")
        }
        report(TransferProgress(completed: written, total: total))
        let end = last.map { $0 + 1 } ?? total
        for try await chunk in response.body {
            if let end, written + Int64(chunk.count) > end {
                response.body.cancel()
                discard()
                throw CatenaError(.invalidResponse, request: request, detail: "the server sent more than the \(end) bytes it announced")
            }
            do {
                try handle.write(contentsOf: chunk)
            } catch {
                response.body.cancel()
                throw CatenaError(.invalidResponse, request: request, underlyingError: error, detail: "writing the download to \(partial.path) failed")
            }
            written += Int64(chunk.count)
            report(TransferProgress(completed: written, total: total))
        }
        if let end, written < end {
            throw CatenaError(.connectionLost, request: request, detail: "the download ended at byte \(written) of \(end)")
        }
        if let total, written < total {
            // A 206 that ended where it said it would: the server caps its ranges.
            guard last == nil else { return .partial }
            throw CatenaError(.connectionLost, request: request, detail: "the download ended at byte \(written) of \(total)")
        }
        try? handle.close()
        try finish(request: request)
        return .done
    }

    /// Moves the whole file into place and removes its record.
    private func finish(request: APIRequest) throws(CatenaError) {
        guard rename(partial.path, destination.path) == 0 else {
            throw CatenaError(.invalidResponse, request: request, detail: "moving the download to \(destination.path) failed (errno \(errno))")
        }
        try? FileManager.default.removeItem(at: recordFile)
    }

    /// Removes the bytes on disk and their record.
    func discard() {
        try? FileManager.default.removeItem(at: partial)
        try? FileManager.default.removeItem(at: recordFile)
    }

    private static func encode(_ record: Record, request: APIRequest) throws(CatenaError) -> Data {
        do {
            return try JSONEncoder().encode(record)
        } catch {
            throw CatenaError(.invalidRequest, request: request, underlyingError: error, detail: "cannot record the download's validator")
        }
    }

    /// `bytes first-last/total` (RFC 9110 §14.4), read without trusting it: the
    /// numbers must be in order and fit; `*` as the total is an unknown length.
    static func contentRange(_ value: String?) -> (start: Int64, last: Int64, total: Int64?)? {
        guard let value, value.utf8.count <= 100, value.hasPrefix("bytes ") else { return nil }
        let rest = value.dropFirst(6)
        let halves = rest.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard halves.count == 2 else { return nil }
        let bounds = halves[0].split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard bounds.count == 2, bounds.allSatisfy({ !$0.isEmpty && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
            let first = Int64(bounds[0]), let last = Int64(bounds[1]), first <= last
        else { return nil }
        if halves[1] == "*" { return (first, last, nil) }
        guard halves[1].allSatisfy({ $0.isASCII && $0.isNumber }), let total = Int64(halves[1]), last < total else { return nil }
        return (first, last, total)
    }
}
