@testable import Catena
@testable import CatenaDemoServer
import Foundation
import HTTPTypes
import Testing
@testable import CatenaTestSupport

/// The demo server's `/api/file`, to a file.
struct FileDownload: DownloadEndpoint {
    let destination: URL
    var size = 1 << 20
    var cutAfter = 0
    var cutTimes: Int?
    var key = uniqueKey()
    var extra: [URLQueryItem] = []

    func makeRequest() throws -> APIRequest {
        var query = [
            URLQueryItem(name: "size", value: String(size)), URLQueryItem(name: "cut_after", value: String(cutAfter)),
            URLQueryItem(name: "key", value: key),
        ]
        if let cutTimes { query.append(URLQueryItem(name: "cut_times", value: String(cutTimes))) }
        return try .get("api", "file", query: query + extra)
    }
}

/// Passes requests on and records what went out and the status that came back.
struct Recorder: HTTPLoader {
    let next: any HTTPLoader
    let seen = Locked<[(range: String?, ifRange: String?, status: Int?)]>([])

    func load(_ request: APIRequest) async throws(CatenaError) -> APIResponse {
        try await stream(request).collect()
    }

    func stream(_ request: APIRequest) async throws(CatenaError) -> StreamedResponse {
        let index = seen.withLock { seen in
            seen.append((request.headerFields[.range], request.headerFields[HTTPField.Name("If-Range")!], nil))
            return seen.count - 1
        }
        let response = try await next.stream(request)
        seen.withLock { $0[index].status = response.status.code }
        return response
    }
}

@Suite("Resumable downloads")
struct ResumableDownloadTests {
    func temporaryFile() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("catena-resume-\(UUID().uuidString)")
    }

    /// The demo file's first `size` bytes. Built once: a million calls in a debug
    /// build hold one of the cooperative pool's two threads for a good part of a
    /// second, and every other test in the process waits.
    static func expected(_ size: Int) -> Data {
        size <= 1 << 20 ? firstMiB.prefix(size) : Data((0..<size).map(StreamRoutes.fileByte))
    }

    private static let firstMiB = Data((0..<(1 << 20)).map(StreamRoutes.fileByte))

    func leftovers(beside file: URL) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: file.deletingLastPathComponent().path)) ?? []
        return names.filter { $0.hasPrefix(".\(file.lastPathComponent)") }
    }

    func progress(of transfer: Transfer<URL>) -> Task<[TransferProgress], Never> {
        Task {
            var seen: [TransferProgress] = []; for await update in transfer.progress { seen.append(update) }; return seen
        }
    }

    @Test(
        "a download cut twice continues with Range and If-Range from the bytes on disk; progress counts on from there",
        arguments: TransportKind.allCases)
    func resumesWithinACall(kind: TransportKind) async throws {
        let file = temporaryFile()
        defer { try? FileManager.default.removeItem(at: file) }
        let recorder = Recorder(next: try await kind.chain())
        let transfer = Client(recorder).resumableDownload(
            FileDownload(destination: file, cutAfter: 400_000),
            policy: ResumePolicy(delay: .milliseconds(10)))
        let updates = progress(of: transfer)
        #expect(try await transfer.value() == file)
        #expect(try Data(contentsOf: file) == Self.expected(1 << 20))
        #expect(leftovers(beside: file).isEmpty)
        let sent = recorder.seen.withLock { $0 }
        // Cut after 400,000 bytes of each response: two resumptions, or three when the
        // dying server dropped writes it had not flushed (under load it does), so the
        // bytes on disk fall short of where it meant to cut.
        #expect(
            (3...4).contains(sent.count) && sent.first?.status == 200 && sent.dropFirst().allSatisfy { $0.status == 206 },
            "\(sent.map(\.status))")
        #expect(sent.dropFirst().allSatisfy { $0.ifRange == "\"file-1048576-v1\"" })
        // Each range starts where the bytes on disk ended, never past where the server cut.
        let offsets = sent.compactMap { $0.range.flatMap { Self.rangeStart($0) } }
        let bounds = [0] + offsets
        #expect(
            offsets.count == sent.count - 1 && zip(bounds, bounds.dropFirst()).allSatisfy { $0 < $1 && $1 <= $0 + 400_000 },
            "\(sent.map(\.range))")
        let seen = await updates.value
        #expect(seen.last == TransferProgress(completed: 1 << 20, total: 1 << 20))
        for offset in offsets {
            #expect(seen.contains(TransferProgress(completed: Int64(offset), total: 1 << 20)), "a resumed request reports its start, \(offset), first")
        }
        #expect(zip(seen, seen.dropFirst()).allSatisfy { $0.completed <= $1.completed }, "progress never goes back")
    }

    /// N of `bytes=N-`.
    static func rangeStart(_ range: String) -> Int? {
        guard range.hasPrefix("bytes="), range.hasSuffix("-") else { return nil }
        return Int(range.dropFirst(6).dropLast())
    }

    @Test("a failed call leaves its bytes for the next, which goes on from them", arguments: TransportKind.allCases)
    func resumesAcrossCalls(kind: TransportKind) async throws {
        let file = temporaryFile()
        defer { try? FileManager.default.removeItem(at: file) }
        let recorder = Recorder(next: try await kind.chain())
        let client = Client(recorder)
        let endpoint = FileDownload(destination: file, cutAfter: 600_000, cutTimes: 1)
        let first = client.resumableDownload(endpoint, policy: ResumePolicy(attempts: 0))
        await #expect(throws: CatenaError.self) { try await first.value() }
        #expect(!FileManager.default.fileExists(atPath: file.path))
        #expect(leftovers(beside: file).count == 2, "the bytes and their validator stay: \(leftovers(beside: file))")
        #expect(try await client.resumableDownload(endpoint, policy: ResumePolicy(attempts: 0)).value() == file)
        #expect(try Data(contentsOf: file) == Self.expected(1 << 20))
        #expect(recorder.seen.withLock { $0.map(\.status) } == [200, 206])
        #expect(leftovers(beside: file).isEmpty)
    }

    @Test("a 200 instead of a 206 (ranges ignored, or the file changed) starts over cleanly", arguments: TransportKind.allCases)
    func startsOver(kind: TransportKind) async throws {
        let chain = try await kind.chain()
        // A server that ignores ranges.
        let ignored = temporaryFile()
        defer { try? FileManager.default.removeItem(at: ignored) }
        let recorder = Recorder(next: chain)
        let transfer = Client(recorder).resumableDownload(
            FileDownload(destination: ignored, cutAfter: 300_000, cutTimes: 1, extra: [URLQueryItem(name: "no_range", value: "1")]),
            policy: ResumePolicy(delay: .milliseconds(10)))
        let updates = progress(of: transfer)
        _ = try await transfer.value()
        #expect(try Data(contentsOf: ignored) == Self.expected(1 << 20))
        #expect(recorder.seen.withLock { $0.map { $0.range.flatMap(Self.rangeStart) != nil } } == [false, true])
        #expect(recorder.seen.withLock { $0.map(\.status) } == [200, 200])
        #expect(await updates.value.last == TransferProgress(completed: 1 << 20, total: 1 << 20))

        // The file changed between the calls: If-Range no longer matches.
        let changed = temporaryFile()
        defer { try? FileManager.default.removeItem(at: changed) }
        let key = uniqueKey()
        let client = Client(chain)
        let endpoint = FileDownload(destination: changed, cutAfter: 300_000, cutTimes: 1, key: key)
        await #expect(throws: CatenaError.self) { try await client.resumableDownload(endpoint, policy: ResumePolicy(attempts: 0)).value() }
        _ = try await chain.load(try APIRequest(.post, path: ["api", "file", "change"], query: [URLQueryItem(name: "key", value: key)]))
        let second = Recorder(next: chain)
        _ = try await Client(second).resumableDownload(endpoint).value()
        #expect(try Data(contentsOf: changed) == Self.expected(1 << 20))
        #expect(second.seen.withLock { $0.map(\.status) } == [200])
        #expect(second.seen.withLock { $0.first?.ifRange } == "\"file-1048576-v1\"")
    }

    @Test(
        "a range of another version (a proxy that ignores If-Range) is never spliced on: the download starts over",
        arguments: TransportKind.allCases)
    func rangeOfAnotherVersion(kind: TransportKind) async throws {
        let chain = try await kind.chain()
        let file = temporaryFile()
        defer { try? FileManager.default.removeItem(at: file) }
        let key = uniqueKey()
        let endpoint = FileDownload(
            destination: file, cutAfter: 300_000, cutTimes: 1, key: key,
            extra: [URLQueryItem(name: "ignore_if_range", value: "1")])
        await #expect(throws: CatenaError.self) { try await Client(chain).resumableDownload(endpoint, policy: ResumePolicy(attempts: 0)).value() }
        _ = try await chain.load(try APIRequest(.post, path: ["api", "file", "change"], query: [URLQueryItem(name: "key", value: key)]))
        let recorder = Recorder(next: chain)
        _ = try await Client(recorder).resumableDownload(endpoint, policy: ResumePolicy(attempts: 0)).value()
        let sent = recorder.seen.withLock { $0 }
        // The 206 carried version 2's ETag against version 1's bytes: refused, then all of it.
        #expect(sent.map(\.status) == [206, 200])
        #expect(sent.map { $0.range != nil } == [true, false])
        #expect(try Data(contentsOf: file) == Self.expected(1 << 20))
        #expect(leftovers(beside: file).isEmpty)
    }

    @Test("a server that caps its range answers: the rest is asked for at once, and that is no failure", arguments: TransportKind.allCases)
    func cappedRanges(kind: TransportKind) async throws {
        let chain = try await kind.chain()
        let file = temporaryFile()
        defer { try? FileManager.default.removeItem(at: file) }
        let endpoint = FileDownload(
            destination: file, cutAfter: 300_000, cutTimes: 1,
            extra: [URLQueryItem(name: "cap", value: "200000")])
        await #expect(throws: CatenaError.self) { try await Client(chain).resumableDownload(endpoint, policy: ResumePolicy(attempts: 0)).value() }
        let recorder = Recorder(next: chain)
        // No attempts to spare: every capped answer must count as progress, not as a failure.
        _ = try await Client(recorder).resumableDownload(endpoint, policy: ResumePolicy(attempts: 0)).value()
        let statuses = recorder.seen.withLock { $0.map(\.status) }
        #expect(statuses.count >= 4 && statuses.allSatisfy { $0 == 206 }, "\(statuses)")
        #expect(try Data(contentsOf: file) == Self.expected(1 << 20))
    }

    @Test(
        "a 416 whose length is the bytes on disk finishes the file (the move into place was all that was missing)",
        arguments: TransportKind.allCases)
    func completeOnDisk(kind: TransportKind) async throws {
        let file = temporaryFile()
        defer { try? FileManager.default.removeItem(at: file) }
        let endpoint = FileDownload(destination: file)
        let request = try endpoint.buildRequest()
        let left = ResumableFile(destination: file, request: request)
        try Self.expected(1 << 20).write(to: left.partial)
        try JSONEncoder().encode(ResumableFile.Record(request: left.requestKey, origin: "", validator: "\"file-1048576-v1\"", total: 1 << 20))
            .write(to: left.recordFile)
        let recorder = Recorder(next: try await kind.chain())
        _ = try await Client(recorder).resumableDownload(endpoint, policy: ResumePolicy(attempts: 0)).value()
        #expect(recorder.seen.withLock { $0.map(\.status) } == [416])
        #expect(try Data(contentsOf: file) == Self.expected(1 << 20))
        #expect(leftovers(beside: file).isEmpty)
    }

    @Test("without a strong validator nothing is resumed: the failure is the answer", arguments: TransportKind.allCases)
    func noValidator(kind: TransportKind) async throws {
        let file = temporaryFile()
        defer { try? FileManager.default.removeItem(at: file) }
        let recorder = Recorder(next: try await kind.chain())
        let transfer = Client(recorder).resumableDownload(
            FileDownload(destination: file, cutAfter: 300_000, extra: [URLQueryItem(name: "weak", value: "1")]),
            policy: ResumePolicy(delay: .milliseconds(10)))
        let error = await #expect(throws: CatenaError.self) { try await transfer.value() }
        #expect(error?.code == .connectionLost)
        #expect(recorder.seen.withLock { $0.count } == 1)
        #expect(!FileManager.default.fileExists(atPath: file.path))
    }

    @Test(
        "Content-Range is read without trusting it",
        arguments: [
            ("bytes 0-9/10", true), ("bytes 5-9/*", true), ("bytes 9-5/10", false), ("bytes 0-10/10", false), ("bytes -5/10", false),
            ("bytes 0-9", false), ("items 0-9/10", false), ("bytes 0-99999999999999999999/1", false), ("bytes +1-9/10", false), ("", false),
        ])
    func contentRange(value: String, valid: Bool) {
        #expect((ResumableFile.contentRange(value) != nil) == valid, "\(value)")
    }
}
