import Catena
import Foundation
import HTTPTypes
import Testing
@testable import CatenaTestSupport

@Suite("curl descriptions reproduce requests")
struct CurlTests {
    static let sortedEncoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return encoder
    }()

    /// Runs `command` with sh and returns its exit status and standard output. The
    /// blocking reads run on a thread of their own: blocking one of the cooperative
    /// pool's two threads starves the in-process demo server that curl is talking to.
    func shell(_ command: String) async throws -> (Int32, Data) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", command]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        return await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                let output = pipe.fileHandleForReading.readDataToEndOfFile()
                process.waitUntilExit()
                continuation.resume(returning: (process.terminationStatus, output))
            }
        }
    }

    @Test(
        "curl sends what Catena sends: method, path and query, headers, JSON, text and binary bodies",
        arguments: [
            // Sorted keys: a dictionary's order changes from one encoding to the next.
            APIRequest.Body.json(["name": "O'Brien", "note": "$(id) `x`"], encoder: CurlTests.sortedEncoder),
            .text("line one\nline 'two'"),
            .data(Data((0..<300).map { UInt8($0 % 256) })),
        ])
    func reproduces(body: APIRequest.Body) async throws {
        let base = try await TestServer.running().baseURL
        var request = try APIRequest(
            .post, baseURL: base, path: ["api", "echo"],
            query: [URLQueryItem(name: "q", value: "it's & more")], body: body)
        request.headerFields[HTTPField.Name("X-Trace")!] = "a'b \"c\""
        let catena = try JSONDecoder().decode(Echo.self, from: try await TransportKind.asyncHTTPClient.make().load(request).body)
        let (status, output) = try await shell(request.curlDescription(redacting: nil) + " --silent --show-error --max-time 20")
        #expect(status == 0, "curl failed: \(request.curlDescription)")
        let curl = try JSONDecoder().decode(Echo.self, from: output)
        #expect(curl.method == catena.method && curl.path == catena.path && curl.query == catena.query)
        #expect(curl.header("X-Trace") == "a'b \"c\"")
        #expect(curl.header("Content-Type") == catena.header("Content-Type"))
        #expect(curl.bodyLength == catena.bodyLength && curl.bodyChecksum == catena.bodyChecksum)
    }

    /// Bodies curl would read as something else if passed as they are: a file to upload
    /// (`@NAME`, `<NAME`), an option (`-X DELETE`), nothing, and every byte value.
    enum HostileBody: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case atFile = "@/etc/hostname"
        case atMention = "@user hello"
        case lessThanFile = "<file"
        case option = "-X DELETE"
        case empty = ""
        case everyByte = "every byte 0-255"

        var testDescription: String { rawValue.isEmpty ? "empty" : rawValue }

        var bytes: Data { self == .everyByte ? Data((0...255).map { UInt8($0) }) : Data(rawValue.utf8) }

        var body: APIRequest.Body {
            switch self {
            case .empty: .empty
            case .everyByte: .data(bytes)
            default: .text(rawValue)
            }
        }
    }

    @Test(
        "curl sends exactly the body the transport sends, whatever it starts with",
        arguments: HostileBody.allCases, TransportKind.allCases)
    func bodiesCurlCouldMisread(body: HostileBody, kind: TransportKind) async throws {
        let base = try await TestServer.running().baseURL
        var request = try APIRequest(.post, baseURL: base, path: ["api", "echo"], body: body.body)
        request.headerFields[HTTPField.Name("X-Empty")!] = ""
        let sent = try JSONDecoder().decode(Echo.self, from: try await kind.make().load(request).body)
        let description = request.curlDescription(redacting: nil)
        #expect(!description.contains("--data-binary '"), "a body passed where curl reads @ and <: \(description)")
        let (status, output) = try await shell(description + " --silent --show-error --max-time 20")
        #expect(status == 0, "curl failed: \(description)")
        let received = try JSONDecoder().decode(Echo.self, from: output)
        #expect(received.method == sent.method && received.path == sent.path)
        #expect(received.bodyLength == sent.bodyLength && received.bodyChecksum == sent.bodyChecksum, "\(description)")
        #expect(received.bodyLength == body.bytes.count)
        #expect(received.header("Content-Type") == sent.header("Content-Type"))
        #expect(received.header("X-Empty") == "")
    }
}
