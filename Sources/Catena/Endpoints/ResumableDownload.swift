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
    /// The body streams to disk: memory stays within ``StreamWindow``, on both
    /// transports. Run one download per destination at a time.
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
                } catch where continued < policy.attempts && download.canResume && ResumableFile.isInterruption(error) {
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
    /// What a later request needs to resume: which request the bytes came from (a
    /// hash of its method and URL: a key in the query never reaches the disk) and
    /// their validator.
    struct Record: Codable, Equatable {
        var request: String
        var validator: String
    }

    let destination: URL
    let requestKey: String
    let partial: URL
    let recordFile: URL

    init(destination: URL, request: APIRequest) {
        self.destination = destination
        // FNV-1a, 64 bits: stable across processes, unlike Hasher.
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in (request.method.rawValue + " " + request.assembleURL(redacting: nil)).utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        requestKey = String(hash, radix: 16)
        let folder = destination.deletingLastPathComponent()
        partial = folder.appendingPathComponent(".\(destination.lastPathComponent).catena-part")
        recordFile = folder.appendingPathComponent(".\(destination.lastPathComponent).catena-part.json")
    }

    /// Whether bytes on disk can be resumed: they came from this URL with a validator.
    var canResume: Bool { resumePoint != nil }

    /// Where a range request can go on from, and the validator to send with it; nil
    /// when there are no bytes on disk, or no record that they came from this request.
    var resumePoint: (offset: Int64, validator: String)? {
        guard let data = FileManager.default.contents(atPath: recordFile.path),
              let record = try? JSONDecoder().decode(Record.self, from: data), record.request == requestKey, !record.validator.isEmpty,
              let size = try? FileManager.default.attributesOfItem(atPath: partial.path)[.size] as? NSNumber, size.int64Value > 0
        else { return nil }
        return (size.int64Value, record.validator)
    }

    /// A failure after which the same request may go on where it stopped.
    static func isInterruption(_ error: CatenaError) -> Bool {
        [.connectionLost, .timedOut].contains(error.code) && !Task.isCancelled
    }

    /// One request: from the bytes on disk when they can be resumed, else from 0.
    mutating func fetch<E: Endpoint>(_ base: APIRequest, endpoint: E, loader: any HTTPLoader,
                                     report: @Sendable (TransferProgress) -> Void) async throws(CatenaError) {
        var request = base
        // Byte ranges count the bytes as stored: a compressed transfer would count others.
        if request.headerFields[.acceptEncoding] == nil { request.headerFields[.acceptEncoding] = "identity" }
        let resume = resumePoint
        let offset = resume?.offset ?? 0
        if let resume {
            request.headerFields[.range] = "bytes=\(resume.offset)-"
            request.headerFields[HTTPField.Name("If-Range")!] = resume.validator
        } else {
            discard()
        }
        let response = try await loader.stream(request)
        let status = response.status.code
        if status == 416, offset > 0 {
            // The bytes on disk are no part of what the server has now.
            response.body.cancel()
            discard()
            throw CatenaError(.connectionLost, request: response.request,
                              detail: "the server cannot send from byte \(offset) (416); the download starts over")
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
        var start: Int64 = 0
        let encoded = response.headerFields[.contentEncoding].map { $0.lowercased() != "identity" } ?? false
        var total = encoded ? nil : response.headerFields[.contentLength].flatMap { Int64($0) }
        if status == 206 {
            guard offset > 0, let range = Self.contentRange(response.headerFields[.contentRange]), range.start == offset else {
                response.body.cancel()
                discard()
                throw CatenaError(.invalidResponse, request: response.request, response: response.head,
                                  detail: "a 206 whose Content-Range (\(response.headerFields[.contentRange]?.prefix(80) ?? "missing")) does not start at byte \(offset)")
            }
            start = offset
            total = range.total
        } else {
            discard()   // a whole new body: what was on disk is not part of it
            let strongETag = response.headerFields[.eTag].flatMap { $0.hasPrefix("W/") ? nil : $0 }
            if let validator = strongETag ?? response.headerFields[.lastModified] {
                let data = try Self.encode(Record(request: requestKey, validator: validator), request: request)
                guard FileManager.default.createFile(atPath: recordFile.path, contents: data) else {
                    response.body.cancel()
                    throw CatenaError(.invalidRequest, request: request, detail: "cannot write beside \(destination.path)")
                }
            }
        }
        try await write(response, from: start, total: total, report: report)
    }

    /// Appends the body to the partial file from `start`, then moves it into place.
    private func write(_ response: StreamedResponse, from start: Int64, total: Int64?,
                       report: @Sendable (TransferProgress) -> Void) async throws(CatenaError) {
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
        for try await chunk in response.body {
            do {
                try handle.write(contentsOf: chunk)
            } catch {
                response.body.cancel()
                throw CatenaError(.invalidResponse, request: request, underlyingError: error, detail: "writing the download to \(partial.path) failed")
            }
            written += Int64(chunk.count)
            report(TransferProgress(completed: written, total: total))
        }
        if let total, written != total {
            throw CatenaError(.connectionLost, request: request, detail: "the download ended at byte \(written) of \(total)")
        }
        try? handle.close()
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
    static func contentRange(_ value: String?) -> (start: Int64, total: Int64?)? {
        guard let value, value.utf8.count <= 100, value.hasPrefix("bytes ") else { return nil }
        let rest = value.dropFirst(6)
        let halves = rest.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard halves.count == 2 else { return nil }
        let bounds = halves[0].split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard bounds.count == 2, bounds.allSatisfy({ !$0.isEmpty && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
              let first = Int64(bounds[0]), let last = Int64(bounds[1]), first <= last else { return nil }
        if halves[1] == "*" { return (first, nil) }
        guard halves[1].allSatisfy({ $0.isASCII && $0.isNumber }), let total = Int64(halves[1]), last < total else { return nil }
        return (first, total)
    }
}
