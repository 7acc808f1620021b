@testable import Catena
@testable import CatenaAsyncHTTPClient
import CatenaDemoServer
import Foundation
import NIOSSL
import Testing
@testable import CatenaTestSupport

/// Public-key pins on AsyncHTTPClient, checked on each new connection after the
/// handshake and before any request byte, against demo servers of their own (each
/// counts the requests it reads).
@Suite("Public-key pins (AsyncHTTPClient)")
struct PublicKeyPinTests {
    static func server(http2: Bool, port: Int = 0) async throws -> (RunningDemoServer, DemoServerCertificate) {
        let certificate = try TLSServers.authority.get().issue()
        return (try await DemoServer.start(port: port, tls: DemoTLS(certificate: certificate, http2: http2)), certificate)
    }

    static func transport(pins: [String: Set<String>], http1: Bool, retries: Bool = false) throws -> AsyncHTTPClientTransport {
        var configuration = AsyncHTTPClientTransport.defaultConfiguration
        if http1 { configuration.httpVersion = .http1Only }
        configuration.connectionPool.retryConnectionEstablishment = retries
        let trust = ServerTrust(additionalRoots: [try TLSServers.authority.get().certificateDER], publicKeyPins: pins)
        return try AsyncHTTPClientTransport(configuration: configuration, trust: trust, timeout: .seconds(10))
    }

    static func call(_ server: RunningDemoServer, _ transport: AsyncHTTPClientTransport, host: String = "127.0.0.1", close: Bool = false) async throws -> Int {
        var request = APIRequest(.get, url: URL(string: "https://\(host):\(server.port)/api/users/2")!)
        if close { request.headerFields[.connection] = "close" }
        return try await transport.load(request).status.code
    }

    /// A pin no key has.
    static let stale = Data(repeating: 7, count: 32).base64EncodedString()

    @Test("the leaf's key, alone or as a backup beside a stale pin, curl's sha256// form too, connects over HTTP/1.1 and HTTP/2", arguments: [false, true])
    func matching(http2: Bool) async throws {
        let (server, certificate) = try await Self.server(http2: http2)
        defer { Task { await server.stop() } }
        for pins in [[certificate.publicKeySHA256], [Self.stale, certificate.publicKeySHA256], ["sha256//" + certificate.publicKeySHA256]] {
            let transport = try Self.transport(pins: ["127.0.0.1": Set(pins)], http1: !http2)
            #expect(try await Self.call(server, transport) == 200, "\(pins)")
            try await transport.shutdown()
        }
        #expect(server.requestsRead == 3)
    }

    @Test(
        "a key that is none of the pins fails the call as untrusted, and the server reads no request; also with AsyncHTTPClient's connection retries on",
        arguments: [false, true], [false, true])
    func mismatch(http2: Bool, retries: Bool) async throws {
        let (server, certificate) = try await Self.server(http2: http2)
        defer { Task { await server.stop() } }
        let transport = try Self.transport(pins: ["127.0.0.1": [Self.stale]], http1: !http2, retries: retries)
        defer { Task { try? await transport.shutdown() } }
        for _ in 0..<2 {
            let error = await #expect(throws: CatenaError.self) { _ = try await Self.call(server, transport) }
            #expect(error?.code == .untrustedServer, "\(String(describing: error))")
            #expect(error?.detail?.contains("none of its pins") == true, "\(String(describing: error))")
            #expect(error?.detail?.contains(certificate.publicKeySHA256) == true, "the error names the key presented")
        }
        #expect(server.requestsRead == 0, "no request reached a server whose key is not pinned")
    }

    @Test("every new connection is checked: after the server closed the first, and to another port of the pinned host with another key")
    func newConnection() async throws {
        let (first, certificate) = try await Self.server(http2: false)
        let (second, _) = try await Self.server(http2: false)
        defer {
            Task {
                await first.stop(); await second.stop()
            }
        }
        let transport = try Self.transport(pins: ["127.0.0.1": [certificate.publicKeySHA256]], http1: true)
        defer { Task { try? await transport.shutdown() } }
        // The server closes each connection after its answer: every call makes a new one.
        for _ in 0..<3 { #expect(try await Self.call(first, transport, close: true) == 200) }
        let error = await #expect(throws: CatenaError.self) { _ = try await Self.call(second, transport) }
        #expect(error?.code == .untrustedServer, "\(String(describing: error))")
        #expect(first.requestsRead == 3 && second.requestsRead == 0)
    }

    @Test("pins are per host: another host of the same server is not held to them")
    func perHost() async throws {
        let (server, _) = try await Self.server(http2: true)
        defer { Task { await server.stop() } }
        let transport = try Self.transport(pins: ["LOCALHOST": [Self.stale]], http1: false)
        defer { Task { try? await transport.shutdown() } }
        #expect(try await Self.call(server, transport, host: "127.0.0.1") == 200)
        let error = await #expect(throws: CatenaError.self) { _ = try await Self.call(server, transport, host: "localhost") }
        #expect(error?.code == .untrustedServer, "host names are matched without case: \(String(describing: error))")
    }

    @Test("no other spelling of a pinned host escapes its pins: case, brackets, trailing dots, IPv6 forms")
    func spellings() throws {
        let trust = ServerTrust(publicKeyPins: ["Api.Example.com.": [Self.stale], "[::1]": [Self.stale], "10.0.0.1": [Self.stale]])
        let routes = ClientRoutes(base: AsyncHTTPClientTransport.defaultConfiguration, proxies: nil, pins: try ClientRoutes.digests(of: trust))
        let spellings = [
            "https://api.example.com/", "https://API.EXAMPLE.COM.:8443/x", "https://[::1]/", "https://[0:0:0::1]:443/", "https://10.0.0.1/",
            "https://[::ffff:10.0.0.1]/", "https://[::ffff:a00:1]/", "https://167772161/", "https://10.1/", "https://0x0a.0.0.1/",
        ]
        for url in spellings {
            let request = APIRequest(.get, url: try #require(URL(string: url)))
            #expect(routes.route(of: request)?.pinnedHost != nil, "\(url) is held to its pins")
        }
        for url in ["https://other.example.com/", "http://api.example.com/", "https://[::2]/"] {
            #expect(routes.route(of: APIRequest(.get, url: try #require(URL(string: url)))) == nil, "\(url)")
        }
        for key in ["api.example.com:443", "[::1]:443", "*.example.com", "https://api.example.com", ""] {
            #expect(throws: ServerTrustError.self, "\(key)" as Comment) { _ = try ClientRoutes.digests(of: ServerTrust(publicKeyPins: [key: [Self.stale]])) }
        }
        var socket = APIRequest(.get, url: try #require(URL(string: "https://api.example.com/")))
        socket[option: UnixSocket.self] = "/tmp/daemon.sock"
        #expect(routes.route(of: socket)?.pinnedHost != nil, "a request over a socket keeps its host's pins")
    }

    @Test("a name beyond ASCII is pinned and routed by its IDNA form, the one the transport connects to, whichever spelling names it")
    func internationalNames() throws {
        #expect(HostName.ascii("Bücher.Example") == "xn--bcher-kva.example")
        #expect(HostName.ascii("API.example.com") == "api.example.com")
        for pinned in ["xn--bcher-kva.example", "bücher.example"] {
            let routes = ClientRoutes(
                base: AsyncHTTPClientTransport.defaultConfiguration, proxies: nil,
                pins: try ClientRoutes.digests(of: ServerTrust(publicKeyPins: [pinned: [Self.stale]])))
            for url in ["https://bücher.example/", "https://BÜCHER.example/x", "https://xn--bcher-kva.example/"] {
                let request = try APIRequest(urlString: url)
                #expect(routes.route(of: request)?.pinnedHost == "xn--bcher-kva.example", "\(url) is held to the pins of \(pinned)")
            }
        }
        // The proxy bypass list reads both spellings alike.
        #expect(ProxyBypass("bücher.example").matches(host: "xn--bcher-kva.example", port: 443))
        #expect(ProxyBypass("xn--bcher-kva.example").matches(host: "shop.bücher.example", port: 443))
        #expect(!ProxyBypass("bucher.example").matches(host: "bücher.example", port: 443))
    }

    @Test("refused at setup: a pin that is no SHA-256, an empty pin set, a pin of a root's key; URLSession refuses pins")
    func refused() throws {
        let authority = try TLSServers.authority.get()
        let rootKey = SHA256.hash(try NIOSSLCertificate(bytes: Array(authority.certificateDER), format: .der).extractPublicKey().toSPKIBytes())
        let cases: [([String: Set<String>], String)] = [
            (["127.0.0.1": ["not base64!"]], "not the base64 of a SHA-256"),
            (["127.0.0.1": [Data(count: 20).base64EncodedString()]], "not the base64 of a SHA-256"),
            (["127.0.0.1": []], "empty"),
            (["127.0.0.1": [Data(rootKey).base64EncodedString()]], "pin the leaf's key"),
        ]
        for (pins, message) in cases {
            let error = #expect(throws: ServerTrustError.self) { _ = try Self.transport(pins: pins, http1: false) }
            #expect(error?.description.contains(message) == true, "\(String(describing: error))")
        }
        #expect(throws: ServerTrustError.self) { _ = try URLSessionTransport(trust: ServerTrust(publicKeyPins: ["a.example": [Self.stale]])) }
    }

    @Test("SHA-256 agrees with Python's hashlib over random inputs, the block boundaries among them")
    func sha256() throws {
        var generator = SystemRandomNumberGenerator()
        var inputs: [[UInt8]] = [[], Array("abc".utf8)] + [55, 56, 63, 64, 65, 119, 120, 128].map { [UInt8](repeating: 0x61, count: $0) }
        for _ in 0..<40 { inputs.append((0..<Int.random(in: 0..<600, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }) }
        let script = "import sys,hashlib\nfor line in sys.stdin.read().split():\n print(hashlib.sha256(bytes.fromhex(line if line != '-' else '')).hexdigest())"
        let hex = inputs.map { $0.isEmpty ? "-" : $0.map { String(format: "%02x", $0) }.joined() }.joined(separator: "\n")
        let output = try runPython(script, input: hex)
        let expected = output.split(separator: "\n").map(String.init)
        try #require(expected.count == inputs.count, "python printed \(expected.count) digests")
        for (input, digest) in zip(inputs, expected) {
            #expect(SHA256.hash(input).map { String(format: "%02x", $0) }.joined() == digest, "\(input.count) bytes")
        }
    }
}

/// Runs `script` with python3, `input` on its standard input; its standard output.
func runPython(_ script: String, input: String) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["python3", "-c", script]
    let stdin = Pipe(), stdout = Pipe()
    process.standardInput = stdin
    process.standardOutput = stdout
    try process.run()
    stdin.fileHandleForWriting.write(Data(input.utf8))
    try stdin.fileHandleForWriting.close()
    let data = stdout.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return String(decoding: data, as: UTF8.self)
}
