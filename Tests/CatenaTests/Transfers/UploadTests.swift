import Catena
import Foundation
import Synchronization
import Testing
@testable import CatenaTestSupport

@Suite("Uploads")
struct UploadTests {
    struct EchoRaw: DataEndpoint {
        let body: APIRequest.Body
        func makeRequest() throws -> APIRequest { try .post("api", "echo-raw", body: body) }
    }

    @Test("a 5 MiB file goes up intact, with progress that ends at its size", arguments: TransportKind.allCases)
    func fileUpload(kind: TransportKind) async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("catena-upload-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        let content = randomData(5 * 1024 * 1024)
        try content.write(to: file)

        let transfer = try await demoClient(kind).upload(EchoRaw(body: .file(file)))
        var updates: [TransferProgress] = []
        for await update in transfer.progress { updates.append(update) }
        #expect(try await transfer.value() == content)
        #expect(updates.last == TransferProgress(completed: Int64(content.count), total: Int64(content.count)))
        #expect(updates.count > 10, "progress as the body goes out, not only at the start and the end: \(updates.count)")
        #expect(zip(updates, updates.dropFirst()).allSatisfy { $0.completed <= $1.completed })
        #expect(transfer.foundationProgress.fractionCompleted == 1)
    }

    @Test("a body whose content type holds a line break is refused before anything is sent, not spliced into the head", arguments: TransportKind.allCases)
    func contentTypeInjection(kind: TransportKind) async throws {
        let body = APIRequest.Body.data(Data("x".utf8), contentType: "text/plain\r\nX-Injected: 1")
        let error = await #expect(throws: CatenaError.self) { try await demoClient(kind).send(EchoRaw(body: body)) }
        #expect(error?.code == .invalidRequest, "\(String(describing: error))")
    }

    struct SlowUpload: DataEndpoint {
        let key: String
        let body: Data
        func makeRequest() throws -> APIRequest {
            try .post("api", "slow-upload", query: .items(["key": key, "interval": "0.05"]), body: .data(body))
        }
    }

    struct SlowUploadStats: Decodable { let bytes: Int; let complete: Bool }

    @Test("a cancelled upload stops: the call ends as cancelled and the server never gets the whole body", arguments: TransportKind.allCases)
    func cancelledUpload(kind: TransportKind) async throws {
        let key = uniqueKey()
        let size = 16 * 1024 * 1024
        let client = try await demoClient(kind)
        let transfer = client.upload(SlowUpload(key: key, body: randomData(size)))
        // Wait until some of the body has gone out (the server reads it slowly).
        var sent: Int64 = 0
        for await update in transfer.progress where update.completed > 0 {
            sent = update.completed
            break
        }
        #expect(sent > 0 && sent < Int64(size))
        let cancelledAt = ContinuousClock.now
        transfer.cancel()
        let error = await #expect(throws: CatenaError.self) { try await transfer.value() }
        #expect(error?.code == .cancelled)
        // The server reads 16 MiB slowly (well over 10 s); 5 s leaves room for a loaded run.
        #expect(ContinuousClock.now - cancelledAt < Timing.stretch(.seconds(5)), "cancelled, not waited out")
        try await Task.sleep(for: .milliseconds(300))
        let stats = try await TransportKind.asyncHTTPClient.chain()
            .load(try APIRequest(.get, path: ["api", "slow-upload", "stats"], query: [URLQueryItem(name: "key", value: key)]))
            .decode(SlowUploadStats.self)
        #expect(!stats.complete && stats.bytes < size, "the server stopped receiving at \(stats.bytes) of \(size) bytes")
    }

    @Test("a stream body is opened afresh for every retry attempt")
    func streamReopenedPerAttempt() async throws {
        let opens = Atomic<Int>(0)
        let body = APIRequest.Body.stream(length: 6) {
            opens.add(1, ordering: .relaxed)
            return AsyncThrowingStream { continuation in
                continuation.yield(Data("abc".utf8))
                continuation.yield(Data("def".utf8))
                continuation.finish()
            }
        }
        let clock = VirtualClock()
        let chain =
            EnvironmentMiddleware(try await TestServer.environment()) --> RetryMiddleware(RetryStrategy(jitter: false), clock: clock)
            --> TransportKind.asyncHTTPClient.make()
        let request = try APIRequest(.put, path: ["api", "flaky"], query: .items(["key": uniqueKey(), "failures": "2"]), body: body)
        #expect(try await chain.load(request).status == .ok)
        #expect(opens.load(ordering: .relaxed) == 3)
    }

    @Test("a file that cannot be read fails as invalidRequest naming it, before anything is sent", arguments: TransportKind.allCases)
    func missingFile(kind: TransportKind) async throws {
        let missing = URL(fileURLWithPath: "/nonexistent/catena-\(UUID().uuidString).bin")
        let error = await #expect(throws: CatenaError.self) { try await demoClient(kind).send(EchoRaw(body: .file(missing))) }
        #expect(error?.code == .invalidRequest)
        #expect(error?.detail?.contains(missing.lastPathComponent) == true)
    }
}
