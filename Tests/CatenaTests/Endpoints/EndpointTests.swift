import Catena
import CatenaTesting
import Foundation
import Testing

@Suite("Endpoint kinds on the mock transport")
struct EndpointKindTests {
    struct Text: StringEndpoint {
        func makeRequest() throws -> APIRequest { try APIRequest(.get, urlString: "http://example.com/text") }
    }

    struct Bytes: DataEndpoint {
        func makeRequest() throws -> APIRequest { try APIRequest(.get, urlString: "http://example.com/bytes") }
    }

    @Test("string and data endpoints return the body; text that is not UTF-8 is decodingFailed")
    func stringAndData() async throws {
        let mock = MockTransport()
        mock.respond(body: Data("héllo".utf8))
        mock.respond(body: Data([0, 1, 2]))
        mock.respond(body: Data([0xFF, 0xFE]))
        let client = Client(mock)
        #expect(try await client.send(Text()) == "héllo")
        #expect(try await client.send(Bytes()) == Data([0, 1, 2]))
        let error = await #expect(throws: CatenaError.self) { try await client.send(Text()) }
        #expect(error?.code == .decodingFailed)
    }

    @Test("a string endpoint reads the charset the Content-Type names; an unknown one is an error that names it")
    func stringCharset() async throws {
        let mock = MockTransport()
        mock.respond(headerFields: [.contentType: "text/plain; charset=ISO-8859-1"], body: Data([0x68, 0xE9]))
        mock.respond(headerFields: [.contentType: "text/plain; charset=\"utf-16le\""], body: Data([0x68, 0x00, 0xE9, 0x00]))
        mock.respond(headerFields: [.contentType: "text/plain"], body: Data("héllo".utf8))
        mock.respond(headerFields: [.contentType: "text/plain; charset=x-unknown"], body: Data("plain".utf8))
        mock.respond(headerFields: [.contentType: "text/plain; charset=koi8-r"], body: Data([0xC1, 0xE9]))
        let client = Client(mock)
        #expect(try await client.send(Text()) == "hé")
        #expect(try await client.send(Text()) == "hé")
        #expect(try await client.send(Text()) == "héllo")
        #expect(try await client.send(Text()) == "plain", "an unknown charset with UTF-8 bytes reads as UTF-8")
        let error = await #expect(throws: CatenaError.self) { try await client.send(Text()) }
        #expect(error?.code == .decodingFailed)
        #expect(error?.detail?.contains("koi8-r") == true)
    }

    @Test("a fan-out cancelled after every call started throws cancelled, not an array of cancellations")
    func fanOutCancelledAfterAllStarted() async throws {
        let mock = MockTransport()
        let started = Catena.Locked(0)
        for _ in 0..<3 {
            mock.enqueue { request throws(CatenaError) in
                started.withLock { $0 += 1 }
                do { try await Task.sleep(for: .seconds(60)) } catch { throw CatenaError(.cancelled, request: request) }
                return APIResponse(status: .ok, request: request)
            }
        }
        let client = Client(mock)
        let task = Task { try await client.sendAll([Bytes(), Bytes(), Bytes()], maxConcurrent: 8) }
        while started.withLock({ $0 }) < 3 { try await Task.sleep(for: .milliseconds(5)) }
        task.cancel()
        guard case .failure(let error) = await task.result else {
            Issue.record("the fan-out returned results")
            return
        }
        #expect((error as? CatenaError)?.code == .cancelled)
    }

    @Test("a trailing slash is added once, explicitly")
    func trailingSlash() throws {
        var request = try APIRequest.get("services", "rest")
        request.appendTrailingSlash()
        request.appendTrailingSlash()
        #expect(request.percentEncodedPath == "/services/rest/")
    }
}

@Suite("Simulated transfers on the mock transport")
struct MockTransferTests {
    struct Upload: DataEndpoint {
        func makeRequest() throws -> APIRequest {
            try APIRequest(.post, urlString: "http://example.com/upload", body: .data(Data(count: 40_000)))
        }
    }

    struct Download: DownloadEndpoint {
        let destination: URL
        func makeRequest() throws -> APIRequest { try APIRequest(.get, urlString: "http://example.com/file") }
    }

    @Test("the mock reports upload progress chunk by chunk")
    func upload() async throws {
        let mock = MockTransport(chunkSize: 10_000)
        mock.respond(status: .ok)
        let transfer = Client(mock).upload(Upload())
        var steps: [Int64] = []
        for await update in transfer.progress { steps.append(update.completed) }
        _ = try await transfer.value()
        #expect(steps == [0, 10_000, 20_000, 30_000, 40_000])
    }

    @Test("the mock writes a download to the file with progress; an error status leaves the file alone")
    func download() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("catena-mock-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        let mock = MockTransport(chunkSize: 4)
        mock.respond(status: .ok, body: Data("0123456789".utf8))
        mock.respond(status: .notFound, json: "{}")
        let client = Client(mock)
        let transfer = client.download(Download(destination: file))
        var steps: [Int64] = []
        for await update in transfer.progress { steps.append(update.completed) }
        #expect(try await transfer.value() == file)
        #expect(steps == [0, 4, 8, 10])
        #expect(try String(contentsOf: file, encoding: .utf8) == "0123456789")

        let missing = file.appendingPathExtension("missing")
        let error = await #expect(throws: CatenaError.self) { try await client.download(Download(destination: missing)).value() }
        #expect(error?.response?.status == .notFound)
        #expect(!FileManager.default.fileExists(atPath: missing.path))
    }
}
