import Catena
import Foundation
import Testing
@testable import CatenaTestSupport

@Suite("Downloads to a file")
struct DownloadTests {
    func temporaryFile() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("catena-download-\(UUID().uuidString)")
    }

    @Test("an 8 MiB body streams to the file with progress, and never into the response", arguments: TransportKind.allCases)
    func download(kind: TransportKind) async throws {
        let file = temporaryFile()
        defer { try? FileManager.default.removeItem(at: file) }
        let updates = Locked<[TransferProgress]>([])
        let size = 8 * 1024 * 1024
        var request = try APIRequest(.get, path: ["api", "bytes", String(size)])
        request[option: DownloadDestination.self] = DownloadDestination(file: file) { progress in updates.withLock { $0.append(progress) } }
        let response = try await kind.chain().load(request)
        #expect(response.status == .ok)
        #expect(response.body.isEmpty)
        #expect(try Data(contentsOf: file) == patternData(size))
        #expect(partialFiles(beside: file).isEmpty)
        let seen = updates.withLock { $0 }
        // Both transports stream the body to the file and report each chunk (URLSession
        // through Catena's transfer session, whose session-level delegate hears them).
        #expect(seen.count > 10, "progress came in steps: \(seen.count)")
        #expect(seen.last == TransferProgress(completed: Int64(size), total: Int64(size)))
        #expect(zip(seen, seen.dropFirst()).allSatisfy { $0.completed <= $1.completed })
    }

    @Test("a destination that is no regular file (a FIFO, as /dev/null is a device) is written in place, not replaced", arguments: TransportKind.allCases)
    func fifoDestination(kind: TransportKind) async throws {
        let fifo = temporaryFile()
        defer { try? FileManager.default.removeItem(at: fifo) }
        #expect(mkfifo(fifo.path, 0o600) == 0)
        // The reading end first, without blocking, so the download's open for writing succeeds.
        let reader = open(fifo.path, O_RDONLY | O_NONBLOCK)
        #expect(reader >= 0)
        defer { close(reader) }
        var request = try APIRequest(.get, path: ["api", "bytes", "1000"])
        request[option: DownloadDestination.self] = DownloadDestination(file: fifo)
        let response = try await kind.chain().load(request)
        #expect(response.status == .ok)
        let type = try FileManager.default.attributesOfItem(atPath: fifo.path)[.type] as? FileAttributeType
        #expect(type != nil && type != .typeRegular, "\(String(describing: type))")
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = read(reader, &buffer, buffer.count)
        #expect(count == 1000)
        #expect(Data(buffer.prefix(max(count, 0))) == patternData(1000))
        #expect(partialFiles(beside: fifo).isEmpty)
    }

    @Test("a failed status keeps its body in memory and leaves the destination alone", arguments: TransportKind.allCases)
    func errorStatus(kind: TransportKind) async throws {
        let file = temporaryFile()
        var request = try APIRequest(.get, path: ["api", "users", "99"])
        request[option: DownloadDestination.self] = DownloadDestination(file: file)
        let response = try await kind.chain().load(request)
        #expect(response.status == .notFound)
        #expect(String(decoding: response.body, as: UTF8.self) == "{}")
        #expect(!FileManager.default.fileExists(atPath: file.path))
    }

    @Test("cancelling or timing out mid-download leaves no file behind", arguments: TransportKind.allCases)
    func interrupted(kind: TransportKind) async throws {
        let drip = [URLQueryItem(name: "chunks", value: "40"), URLQueryItem(name: "interval", value: "0.05")]

        let cancelledFile = temporaryFile()
        var request = try APIRequest(.get, path: ["api", "drip"], query: drip)
        request[option: DownloadDestination.self] = DownloadDestination(file: cancelledFile)
        let chain = try await kind.chain()
        let task = Task { [request] in try await chain.load(request) }
        try await Task.sleep(for: .milliseconds(400))
        task.cancel()
        #expect(((await task.result).failure as? CatenaError)?.code == .cancelled)

        let timedOutFile = temporaryFile()
        var slow = try APIRequest(.get, path: ["api", "drip"], query: drip)
        slow[option: DownloadDestination.self] = DownloadDestination(file: timedOutFile)
        slow.timeout = .milliseconds(400)
        let error = await #expect(throws: CatenaError.self) { try await chain.load(slow) }
        #expect(error?.code == .timedOut)

        try await Task.sleep(for: .milliseconds(200))
        for file in [cancelledFile, timedOutFile] {
            #expect(!FileManager.default.fileExists(atPath: file.path))
            #expect(partialFiles(beside: file).isEmpty)
        }
    }

    struct BytesDownload: DownloadEndpoint {
        let count: Int
        let destination: URL
        var drip = false
        func makeRequest() throws -> APIRequest {
            drip ? try .get("api", "drip", query: .items(["chunks": "40", "interval": "0.05"])) : try .get("api", "bytes", String(count))
        }
    }

    @Test("Client.download: progress as an AsyncSequence and a Foundation Progress, content is the file", arguments: TransportKind.allCases)
    func clientDownload(kind: TransportKind) async throws {
        let file = temporaryFile()
        defer { try? FileManager.default.removeItem(at: file) }
        let transfer = try await demoClient(kind).download(BytesDownload(count: 2 * 1024 * 1024, destination: file))
        var last: TransferProgress?
        for await update in transfer.progress { last = update }
        #expect(try await transfer.value() == file)
        #expect(last == TransferProgress(completed: 2 * 1024 * 1024, total: 2 * 1024 * 1024))
        #expect(transfer.foundationProgress.fractionCompleted == 1)
        #expect(try Data(contentsOf: file).count == 2 * 1024 * 1024)
    }

    @Test("cancelling the Foundation Progress cancels the download", arguments: TransportKind.allCases)
    func cancelThroughProgress(kind: TransportKind) async throws {
        let file = temporaryFile()
        let transfer = try await demoClient(kind).download(BytesDownload(count: 0, destination: file, drip: true))
        try await Task.sleep(for: .milliseconds(300))
        transfer.foundationProgress.cancel()
        let error = await #expect(throws: CatenaError.self) { try await transfer.value() }
        #expect(error?.code == .cancelled)
        #expect(!FileManager.default.fileExists(atPath: file.path))
    }
}

/// Partial download files left beside `file`.
func partialFiles(beside file: URL) -> [String] {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: file.deletingLastPathComponent().path)) ?? []
    return names.filter { $0.hasPrefix(".\(file.lastPathComponent).") && $0.hasSuffix(".part") }
}

@Suite("Downloads to one destination")
struct SharedDestinationTests {
    @Test("two downloads to one file at once leave one of them whole, never a mix", arguments: TransportKind.allCases)
    func twoAtOnce(kind: TransportKind) async throws {
        let chain = try await kind.chain()
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("catena-shared-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        let sizes = [3_000_000, 3_000_001]
        try await withThrowingTaskGroup(of: Void.self) { group in
            for size in sizes {
                group.addTask {
                    var request = try APIRequest(.get, path: ["api", "bytes", String(size)])
                    request[option: DownloadDestination.self] = DownloadDestination(file: file)
                    #expect(try await chain.load(request).status == .ok)
                }
            }
            try await group.waitForAll()
        }
        let written = try Data(contentsOf: file)
        #expect(sizes.contains(written.count))
        #expect(written == patternData(written.count), "the file is one download, whole")
        #expect(partialFiles(beside: file).isEmpty)
    }
}
