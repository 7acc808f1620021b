import Catena
import Foundation
import Synchronization
import Testing

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
        let chain = ApplyEnvironment(try await TestServer.environment()) --> Retry(RetryStrategy(jitter: false), clock: clock)
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
