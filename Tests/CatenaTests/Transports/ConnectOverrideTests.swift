@testable import Catena
@testable import CatenaAsyncHTTPClient
import CatenaDemoServer
import Foundation
import Testing
@testable import CatenaTestSupport

/// curl's `--resolve` and `--connect-to`: the text forms, then requests that keep their
/// name while they connect to loopback.
@Suite("Connect overrides (--resolve, --connect-to)")
struct ConnectOverrideTests {
    @Test("curl's forms read as curl reads them")
    func forms() throws {
        let resolve = try ConnectOverride(resolve: "API.example.com:8443:127.0.0.1")
        #expect(resolve == (try ConnectOverride(host: "api.example.com", port: 8443, targetHost: "127.0.0.1")))
        #expect(try ConnectOverride(resolve: "api.example.com:*:[::1]").port == nil)
        #expect(try ConnectOverride(resolve: "api.example.com:443:::1").targetHost == "::1")
        let anyHost = try ConnectOverride(connectTo: "::staging.example.com:")
        #expect(anyHost.host == nil && anyHost.port == nil && anyHost.targetHost == "staging.example.com" && anyHost.targetPort == nil)
        let v6 = try ConnectOverride(connectTo: "db.example.com:80:[::1]:8080")
        #expect(v6.host == "db.example.com" && v6.targetHost == "::1" && v6.targetPort == 8080)
        #expect(v6.description == "db.example.com:80:[::1]:8080")
        #expect(!v6.matches(host: "db.example.com", port: 81))
        #expect(resolve.matches(host: "api.EXAMPLE.com", port: 8443))
        #expect(resolve.matches(host: "api.example.com.", port: 8443))
        #expect(try ConnectOverride(resolve: "xn--bcher-kva.example:443:127.0.0.1").matches(host: "bücher.example", port: 443))
        #expect(!resolve.matches(host: "example.com", port: 8443))
        // Overrides are for names: an address connects to itself, checked against itself.
        #expect(!anyHost.matches(host: "127.0.0.1", port: 443))
        #expect(!anyHost.matches(host: "[::1]", port: 443))
        #expect(anyHost.matches(host: "localhost", port: 443))
    }

    @Test(
        "a wrong value is refused with an error that names what is wrong",
        arguments: [
            ("+api.example.com:443:127.0.0.1", "+ and -"), ("api.example.com:443:127.0.0.1,127.0.0.2", "one address"),
            ("api.example.com:70000:127.0.0.1", "outside"), ("api.example.com:443:localhost", "IP address"), ("api.example.com:443", "HOST:PORT"),
            ("api.exa\u{1B}[31mmple.com:443:127.0.0.1", "no host name"), (":443:127.0.0.1", "HOST:PORT:ADDRESS"),
            ("api.example.com:-1:127.0.0.1", "not a port"),
        ])
    func refusedResolve(text: String, names: String) {
        let error = #expect(throws: ConnectOverrideError.self) { try ConnectOverride(resolve: text) }
        #expect(error?.description.contains(names) == true, "\(error.map(String.init(describing:)) ?? "none")")
        #expect(error?.description.unicodeScalars.contains("\u{1B}") == false)
    }

    @Test(
        "--connect-to's wrong values: shape, ports, brackets, an address as the host, an address with leading zeros",
        arguments: [
            "a:1:b", "a:1:b:2:3", "[::1:80::", "a:1:[nothost]:2", "a:0:b:1", "a:1:b:99999999999999999999", "127.0.0.1:443:10.0.0.1:",
            "[::1]:443:h:", "h:443:010.0.0.1:", "h:443:1.2.3:",
        ])
    func refusedConnectTo(text: String) {
        #expect(throws: ConnectOverrideError.self) { try ConnectOverride(connectTo: text) }
    }

    @Test("random text never traps; values built from random parts write back as themselves (5,000 cases each)")
    func randomText() throws {
        let alphabet = Array(":::[]*,+-.0123456789abcXYZ%_é\u{0}\u{1B} ")
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<5000 {
            let text = String((0..<Int.random(in: 0...24, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! })
            for override in [try? ConnectOverride(resolve: text), try? ConnectOverride(connectTo: text)].compactMap({ $0 }) {
                #expect(try ConnectOverride(connectTo: override.description) == override, "\(text)")
                #expect(!override.description.unicodeScalars.contains { $0.value < 0x20 })
            }
        }
        let names = ["api.example.com", "a", "x-1.test.", "db_1.local"], targets = ["127.0.0.1", "::1", "2001:db8::7", "staging.example.com"]
        for _ in 0..<5000 {
            let host = Bool.random(using: &generator) ? names.randomElement(using: &generator)! : nil
            let port = Bool.random(using: &generator) ? Int.random(in: 1...65535, using: &generator) : nil
            let target = Bool.random(using: &generator) ? targets.randomElement(using: &generator)! : nil
            let targetPort = Bool.random(using: &generator) ? Int.random(in: 1...65535, using: &generator) : nil
            let override = try ConnectOverride(host: host, port: port, targetHost: target, targetPort: targetPort)
            #expect(try ConnectOverride(connectTo: override.description) == override, "\(override)")
            if let host, let port, let target, IPAddress.bytes(of: target) != nil {
                let resolved = try ConnectOverride(resolve: "\(host):\(port):\(target)")
                #expect(resolved.matches(host: host, port: port) && resolved.targetHost == target)
            }
        }
    }

    /// A demo server whose certificate names api.example.com only, reached on loopback.
    private static func server() async throws -> (RunningDemoServer, DemoServerCertificate) {
        let certificate = try TLSServers.authority.get().issue(for: ["api.example.com"])
        return (try await DemoServer.start(tls: DemoTLS(certificate: certificate, http2: false), webSockets: true), certificate)
    }

    private static func transport(pin: String, port: Int) throws -> AsyncHTTPClientTransport {
        let trust = ServerTrust(additionalRoots: [try TLSServers.authority.get().certificateDER], publicKeyPins: ["api.example.com": [pin]])
        return try AsyncHTTPClientTransport(trust: trust, connectTo: [try ConnectOverride(resolve: "api.example.com:\(port):127.0.0.1")], timeout: .seconds(10))
    }

    @Test("a call and a WebSocket to a name reach loopback, with the certificate and pins checked for that name")
    func resolvedByName() async throws {
        let (server, certificate) = try await Self.server()
        defer { Task { await server.stop() } }
        let transport = try Self.transport(pin: certificate.publicKeySHA256, port: server.port)
        let response = try await transport.load(APIRequest(.get, url: URL(string: "https://api.example.com:\(server.port)/api/users/2")!))
        #expect(response.status.code == 200)
        let socket = try await transport.webSocket(try APIRequest(urlString: "wss://api.example.com:\(server.port)/ws/echo"))
        try await socket.send(text: "by name")
        var messages = socket.messages.makeAsyncIterator()
        #expect(try await messages.next() == .text("by name"))
        await socket.close()
        try await transport.shutdown()

        // The pins are the name's: a wrong one fails both before a byte is sent.
        let wrong = try Self.transport(pin: Data(repeating: 7, count: 32).base64EncodedString(), port: server.port)
        let refused = await #expect(throws: CatenaError.self) {
            try await wrong.load(APIRequest(.get, url: URL(string: "https://api.example.com:\(server.port)/api/users/2")!))
        }
        #expect(refused?.code == .untrustedServer)
        let refusedSocket = await #expect(throws: CatenaError.self) {
            try await wrong.webSocket(try APIRequest(urlString: "wss://api.example.com:\(server.port)/ws/echo"))
        }
        #expect(refusedSocket?.code == .untrustedServer)
        try await wrong.shutdown()
    }

    @Test("refused at setup: an override that changes the port, and one beside the configuration's own proxy")
    func refusedAtSetup() throws {
        let error = #expect(throws: ServerTrustError.self) {
            _ = try AsyncHTTPClientTransport(trust: .system, connectTo: [try ConnectOverride(connectTo: "api.example.com:443:127.0.0.1:8443")])
        }
        #expect(error?.description.contains("port") == true)
        var configuration = AsyncHTTPClientTransport.defaultConfiguration
        configuration.proxy = .server(host: "127.0.0.1", port: 3128)
        let proxied = #expect(throws: ServerTrustError.self) {
            _ = try AsyncHTTPClientTransport(
                configuration: configuration, trust: .system, connectTo: [try ConnectOverride(resolve: "api.example.com:443:127.0.0.1")])
        }
        #expect(proxied?.description.contains("ProxySettings") == true)
    }

    @Test("routes: an override applies to a name, not through a proxy, not over a Unix socket, and joins the caller's dnsOverride")
    func routes() throws {
        var base = AsyncHTTPClientTransport.defaultConfiguration
        base.dnsOverride = ["other.example.com": "127.0.0.2"]
        let proxies = ProxySettings(http: .init(host: "127.0.0.1", port: 3128), https: nil, bypass: ProxyBypass("direct.example.com"))
        let routes = ClientRoutes(
            base: base, proxies: proxies, pins: [:],
            overrides: [try ConnectOverride(connectTo: ":443:127.0.0.1:"), try ConnectOverride(connectTo: ":80:127.0.0.1:")])
        let named = routes.route(of: APIRequest(.get, url: URL(string: "https://api.example.com/")!))
        #expect(named?.connect == ClientRoutes.ConnectTarget(host: "api.example.com", target: "127.0.0.1"))
        let configuration = routes.configuration(for: try #require(named))
        #expect(configuration.dnsOverride == ["other.example.com": "127.0.0.2", "api.example.com": "127.0.0.1"])
        #expect(routes.route(of: APIRequest(.get, url: URL(string: "https://127.0.0.1/")!))?.connect == nil)
        #expect(routes.route(of: APIRequest(.get, url: URL(string: "http://api.example.com/")!))?.proxy != nil)
        #expect(routes.route(of: APIRequest(.get, url: URL(string: "http://api.example.com/")!))?.connect == nil)
        #expect(routes.route(of: APIRequest(.get, url: URL(string: "http://direct.example.com/")!))?.connect?.target == "127.0.0.1")
        var overSocket = APIRequest(.get, url: URL(string: "https://api.example.com/")!)
        overSocket[option: UnixSocket.self] = "/tmp/none.sock"
        #expect(routes.route(of: overSocket)?.connect == nil)
    }

    @Test("nginx sees the request's own name in Host while the connection goes to loopback", .enabled(if: NginxProcess.testsRun))
    func nginxSeesTheName() async throws {
        let nginx = try await NginxProcess.start(locations: #"location /host { default_type text/plain; return 200 "$http_host"; }"#)
        defer { nginx.stop() }
        let transport = try AsyncHTTPClientTransport(
            trust: .system, connectTo: [try ConnectOverride(connectTo: "api.example.com:\(nginx.port):127.0.0.1:")], timeout: .seconds(10))
        let response = try await transport.load(APIRequest(.get, url: URL(string: "http://api.example.com:\(nginx.port)/host")!))
        #expect(response.status.code == 200)
        #expect(String(decoding: response.body, as: UTF8.self) == "api.example.com:\(nginx.port)")
        try await transport.shutdown()
    }
}
