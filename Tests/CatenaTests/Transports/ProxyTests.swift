import Catena
import CatenaAsyncHTTPClient
import CatenaDemoServer
import Foundation
import Testing
@testable import CatenaTestSupport

/// AsyncHTTPClient through real proxies on loopback: tinyproxy (CONNECT with Basic
/// authentication) and Dante (SOCKS5). Each test starts the proxy and a demo server of
/// its own, so the proxy's log and the server's request count are the test's alone.
@Suite("Proxies (tinyproxy and Dante on loopback)", .enabled(if: ProxyProcess.testsRun))
struct ProxyTests {
    static let user = "alice"
    static let password = "proxy-\(UUID().uuidString)"

    static func transport(_ settings: ProxySettings, http1: Bool = false) throws -> AsyncHTTPClientTransport {
        var configuration = AsyncHTTPClientTransport.defaultConfiguration
        if http1 { configuration.httpVersion = .http1Only }
        return try AsyncHTTPClientTransport(configuration: configuration, trust: try TLSServers.trust(), proxy: settings, timeout: .seconds(10))
    }

    static func echo(_ server: RunningDemoServer, through transport: some HTTPLoader) async throws -> [String: String] {
        let response = try await transport.load(APIRequest(.get, url: server.baseURL.appendingPathComponent("api/echo")))
        #expect(response.status.code == 200)
        return try JSONDecoder().decode(EchoHeaders.self, from: response.body).headers
    }

    @Test(
        "HTTPS through an authenticated CONNECT proxy: TLS end to end, the tunnel in the proxy's log, its credentials never at the server",
        arguments: [false, true])
    func connectTunnel(http2: Bool) async throws {
        let proxy = try await ProxyProcess.tinyproxy(user: Self.user, password: Self.password)
        defer { proxy.stop() }
        let server = try await DemoServer.start(tls: DemoTLS(certificate: try TLSServers.authority.get().issue(), http2: http2))
        defer { Task { await server.stop() } }
        let transport = try Self.transport(ProxySettings("http://\(Self.user):\(Self.password)@127.0.0.1:\(proxy.port)"), http1: !http2)
        defer { Task { try? await transport.shutdown() } }
        let headers = try await Self.echo(server, through: transport)
        #expect(headers.keys.allSatisfy { !$0.lowercased().hasPrefix("proxy-") }, "\(headers.keys)")
        #expect(!headers.values.contains { $0.contains(Self.password) || $0.contains(Data("\(Self.user):\(Self.password)".utf8).base64EncodedString()) })
        #expect(await proxy.eventuallyLogged(port: server.port), "the proxy opened the tunnel: \(proxy.log)")
        // The demo authority's certificate was checked through the tunnel: the proxy saw a CONNECT, never a request line.
        #expect(!proxy.log.contains("/api/echo"), "the proxy saw no plaintext request")
    }

    @Test("HTTPS to an IP address through a proxy is checked against that address, not the proxy's, as curl checks it")
    func ipThroughProxy() async throws {
        let proxy = try await ProxyProcess.tinyproxy()
        defer { proxy.stop() }
        // A certificate for 127.0.0.1 only, on 127.0.0.2: through a proxy on 127.0.0.1,
        // NIOSSL alone would compare it with the proxy's address and take it.
        let wrong = try await DemoServer.start(host: "127.0.0.2", tls: DemoTLS(certificate: try TLSServers.authority.get().issue(for: ["127.0.0.1"])))
        defer { Task { await wrong.stop() } }
        let right = try await DemoServer.start(host: "127.0.0.2", tls: DemoTLS(certificate: try TLSServers.authority.get().issue(for: ["127.0.0.2"])))
        defer { Task { await right.stop() } }
        let transport = try Self.transport(ProxySettings("http://127.0.0.1:\(proxy.port)"))
        defer { Task { try? await transport.shutdown() } }
        let error = await #expect(throws: CatenaError.self) {
            try await transport.load(APIRequest(url: URL(string: "https://127.0.0.2:\(wrong.port)/api/echo")!))
        }
        #expect(error?.code == .untrustedServer)
        #expect(error?.detail?.contains("does not name 127.0.0.2") == true, "\(String(describing: error))")
        #expect(await Timing.eventually(within: .seconds(5)) { proxy.log.contains("CONNECT 127.0.0.2:\(wrong.port) ") }, "through the tunnel: \(proxy.log)")
        // The certificate that names the address is taken through the same proxy.
        let answer = try await transport.load(APIRequest(url: URL(string: "https://127.0.0.2:\(right.port)/api/echo")!))
        #expect(answer.status == .ok)
    }

    @Test("HTTPS to an IP address through a configuration's own proxy, which Catena's check cannot see, is refused before it is sent")
    func ipThroughOwnProxyRefused() async throws {
        let proxy = try await ProxyProcess.tinyproxy()
        defer { proxy.stop() }
        var configuration = AsyncHTTPClientTransport.defaultConfiguration
        configuration.proxy = .server(host: "127.0.0.1", port: proxy.port)
        let transport = AsyncHTTPClientTransport(configuration: configuration, timeout: .seconds(10))
        defer { Task { try? await transport.shutdown() } }
        let error = await #expect(throws: CatenaError.self) { try await transport.load(APIRequest(url: URL(string: "https://127.0.0.2:9/x")!)) }
        #expect(error?.code == .invalidRequest)
        #expect(error?.detail?.contains("ProxySettings") == true, "\(String(describing: error))")
        #expect(!proxy.log.contains("127.0.0.2"), "nothing went to the proxy: \(proxy.log)")
    }

    @Test("plain HTTP through the proxy, and a wrong proxy password fails clearly without reaching the server")
    func plainAndRefused() async throws {
        let proxy = try await ProxyProcess.tinyproxy(user: Self.user, password: Self.password)
        defer { proxy.stop() }
        let server = try await DemoServer.start()
        defer { Task { await server.stop() } }
        let good = try Self.transport(ProxySettings("\(Self.user):\(Self.password)@127.0.0.1:\(proxy.port)"))
        defer { Task { try? await good.shutdown() } }
        _ = try await Self.echo(server, through: good)
        #expect(await proxy.eventuallyLogged(port: server.port), "\(proxy.log)")
        let wrong = "wrong-\(UUID().uuidString)"
        let bad = try Self.transport(ProxySettings("http://\(Self.user):\(wrong)@127.0.0.1:\(proxy.port)"))
        defer { Task { try? await bad.shutdown() } }
        let before = server.requestsRead
        let error = await #expect(throws: CatenaError.self) { _ = try await Self.echo(server, through: bad) }
        #expect(error?.code == .cannotConnect, "\(String(describing: error))")
        // tinyproxy answers a CONNECT with a wrong password 401, others 407: either is the proxy's refusal.
        #expect(error?.detail?.contains("proxy") == true, "\(String(describing: error))")
        #expect(!String(describing: error).contains(wrong) && !String(reflecting: error).contains(wrong), "the password is never shown")
        #expect(server.requestsRead == before)
    }

    @Test("the bypass list's hosts go direct, the others through the proxy; settings from the environment as curl reads them")
    func bypass() async throws {
        let proxy = try await ProxyProcess.tinyproxy()
        defer { proxy.stop() }
        let direct = try await DemoServer.start(), proxied = try await DemoServer.start()
        defer {
            Task {
                await direct.stop(); await proxied.stop()
            }
        }
        let environment = [
            "HTTP_PROXY": "http://127.0.0.1:1",  // ignored, as by curl: a CGI server's request header
            "http_proxy": "127.0.0.1:\(proxy.port)", "NO_PROXY": "example.com, 127.0.0.1:\(direct.port)",
        ]
        let settings = try #require(try ProxySettings.environment(environment))
        let transport = try Self.transport(settings)
        defer { Task { try? await transport.shutdown() } }
        _ = try await Self.echo(direct, through: transport)
        _ = try await Self.echo(proxied, through: transport)
        #expect(await proxy.eventuallyLogged(port: proxied.port), "\(proxy.log)")
        #expect(!proxy.logged(port: direct.port), "a NO_PROXY host never goes through the proxy: \(proxy.log)")
        #expect(direct.requestsRead == 1 && proxied.requestsRead == 1)
    }

    @Test("each redirect hop takes its own route: from a proxied host to a bypassed one")
    func redirectAcrossRoutes() async throws {
        let proxy = try await ProxyProcess.tinyproxy()
        defer { proxy.stop() }
        let server = try await DemoServer.start()
        defer { Task { await server.stop() } }
        let transport = try Self.transport(ProxySettings("127.0.0.1:\(proxy.port)", bypass: ProxyBypass("127.0.0.1")))
        defer { Task { try? await transport.shutdown() } }
        let url = try #require(URL(string: "http://localhost:\(server.port)/api/redirect-host?host=127.0.0.1&to=/api/users/2"))
        #expect(try await transport.load(APIRequest(.get, url: url)).status.code == 200)
        #expect(await Timing.eventually(within: .seconds(5)) { proxy.log.contains("CONNECT localhost:\(server.port) ") }, "\(proxy.log)")
        #expect(!proxy.log.contains("CONNECT 127.0.0.1:\(server.port) "), "the bypassed hop went direct: \(proxy.log)")
        #expect(server.requestsRead == 2)
    }

    @Test("HTTPS and HTTP through a SOCKS5 proxy (Dante)")
    func socks() async throws {
        let proxy = try await ProxyProcess.dante()
        defer { proxy.stop() }
        let plain = try await DemoServer.start()
        let secure = try await DemoServer.start(tls: DemoTLS(certificate: try TLSServers.authority.get().issue()))
        defer {
            Task {
                await plain.stop(); await secure.stop()
            }
        }
        let transport = try Self.transport(ProxySettings("socks5://127.0.0.1:\(proxy.port)"))
        defer { Task { try? await transport.shutdown() } }
        for server in [plain, secure] {
            _ = try await Self.echo(server, through: transport)
            #expect(await proxy.eventuallyLogged(port: server.port), "\(proxy.log)")
        }
    }
}

private struct EchoHeaders: Decodable { let headers: [String: String] }

/// Proxy settings without a proxy process: parsing, the environment, the bypass rules,
/// and what URLSession refuses.
@Suite("Proxy settings")
struct ProxySettingsTests {
    @Test("curl's variables: lower case wins, HTTP_PROXY is ignored, ALL_PROXY fills in, empty is unset")
    func environment() throws {
        #expect(try ProxySettings.environment([:]) == nil)
        #expect(try ProxySettings.environment(["HTTP_PROXY": "http://p:1"]) == nil)
        #expect(try ProxySettings.environment(["http_proxy": " "]) == nil)
        let both = try #require(try ProxySettings.environment(["https_proxy": "a:1", "HTTPS_PROXY": "b:2", "ALL_PROXY": "socks5h://c"]))
        #expect(both.https == ProxySettings.Proxy(host: "a", port: 1))
        #expect(both.http == ProxySettings.Proxy(kind: .socks5, host: "c", port: 1080))
        let error = #expect(throws: ProxySettingsError.self) { _ = try ProxySettings.environment(["https_proxy": "https://u:hunter2@p:1"]) }
        #expect(error?.description.hasPrefix("https_proxy:") == true, "\(String(describing: error))")
        #expect(error?.description.contains("hunter2") == false)
    }

    @Test("proxy URLs: user and password percent-decoded, never shown; bad ones refused with the reason")
    func urls() throws {
        let proxy = try ProxySettings.Proxy("http://us%40er:p%3Ass@[::1]:3128")
        #expect(proxy.host == "::1" && proxy.port == 3128)
        #expect(proxy.credentials?.user == "us@er" && proxy.credentials?.password == "p:ss")
        #expect(!proxy.description.contains("p:ss") && !String(reflecting: proxy).contains("p:ss"))
        var dumped = ""
        dump(ProxySettings(proxy), to: &dumped)
        #expect(!dumped.contains("p:ss"), "\(dumped)")
        for bad in ["ftp://p:1", "http://:1", "http://p:0", "http://p:70000", "http://p:1/path", "socks5://u:secret@p:1"] {
            let error = #expect(throws: ProxySettingsError.self, "\(bad)" as Comment) { _ = try ProxySettings.Proxy(bad) }
            #expect(error?.description.contains("secret") == false)
        }
    }

    @Test("bypass rules: names cover their subdomains, addresses and CIDR blocks, ports, * for all")
    func bypassRules() {
        let list = ProxyBypass(".Example.com, internal:8080 10.0.0.0/8,[::1],192.168.1.7, fd00::/8, ,bogus/3")
        #expect(list.matches(host: "example.com", port: 443))
        #expect(list.matches(host: "API.example.COM.", port: 80))
        #expect(!list.matches(host: "notexample.com", port: 443))
        #expect(list.matches(host: "internal", port: 8080) && !list.matches(host: "internal", port: 80))
        #expect(list.matches(host: "10.200.3.4", port: 1) && !list.matches(host: "11.0.0.1", port: 1))
        #expect(list.matches(host: "[::1]", port: 1) && list.matches(host: "::1", port: 1) && !list.matches(host: "::2", port: 1))
        #expect(list.matches(host: "fd12::1", port: 1) && !list.matches(host: "fe80::1", port: 1))
        #expect(!list.matches(host: "192.168.1.70", port: 1), "an address matches whole, never by suffix")
        #expect(ProxyBypass("*").matches(host: "anything", port: 1))
        #expect(!ProxyBypass("").matches(host: "anything", port: 1))
        let settings = ProxySettings(http: ProxySettings.Proxy(host: "p", port: 1), https: nil, bypass: list)
        #expect(settings.proxy(scheme: "http", host: "example.org", port: nil) != nil)
        #expect(settings.proxy(scheme: "HTTP", host: "x.example.com", port: nil) == nil)
        #expect(settings.proxy(scheme: "https", host: "example.org", port: nil) == nil, "no https proxy given")
    }

    @Test("property: a name matches exactly its own subdomains; an IPv4 address matches a block iff its prefix agrees")
    func bypassProperties() {
        var generator = SystemRandomNumberGenerator()
        let labels = ["a", "b", "ab", "x-y", "0", "zz"]
        for _ in 0..<500 {
            let domain = (0..<Int.random(in: 1...3, using: &generator)).map { _ in labels.randomElement(using: &generator)! }.joined(separator: ".")
            let prefix = (0..<Int.random(in: 0...2, using: &generator)).map { _ in labels.randomElement(using: &generator)! }
            let host = (prefix + [domain]).joined(separator: ".")
            let glued = (labels.randomElement(using: &generator)! + domain)
            let list = ProxyBypass(Bool.random(using: &generator) ? "." + domain : domain)
            // A host that reads as an address ("0.0.0.0") matches address entries only.
            #expect(list.matches(host: host, port: 443) == (IPAddress.bytes(of: host) == nil), "\(host) under \(domain)")
            #expect(!list.matches(host: glued, port: 443) || glued.hasSuffix("." + domain) || glued == domain, "\(glued) vs \(domain)")
            let address = (0..<4).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let block = (0..<4).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let bits = Int.random(in: 0...32, using: &generator)
            let value = { (bytes: [UInt8]) in bytes.reduce(UInt32(0)) { $0 << 8 | UInt32($1) } }
            let mask: UInt32 = bits == 0 ? 0 : ~UInt32(0) << UInt32(32 - bits)
            let expected = value(address) & mask == value(block) & mask
            let text = { (bytes: [UInt8]) in bytes.map(String.init).joined(separator: ".") }
            #expect(ProxyBypass("\(text(block))/\(bits)").matches(host: text(address), port: 1) == expected, "\(text(address)) in \(text(block))/\(bits)")
        }
    }

    @Test("no wire input traps the parsers: random bytes as a proxy URL and as a bypass list")
    func fuzz() {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("abc09.:/@[]%*,- \t/\u{0}é")
        for _ in 0..<2_000 {
            let text = String((0..<Int.random(in: 0..<40, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! })
            _ = try? ProxySettings.Proxy(text)
            let list = ProxyBypass(text)
            _ = list.matches(host: text, port: 80)
        }
        #expect(Bool(true), "reached without a trap")
    }

    @Test("AsyncHTTPClient refuses a SOCKS5 proxy with a password and a proxy without a port, never showing the password")
    func refusedProxies() {
        let socks = ProxySettings(ProxySettings.Proxy(kind: .socks5, host: "p", port: 1080, credentials: BasicCredentials(user: "u", password: "hunter2")))
        let noPort = ProxySettings(ProxySettings.Proxy(host: "p", port: 0))
        for settings in [socks, noPort] {
            let error = #expect(throws: ServerTrustError.self) { _ = try AsyncHTTPClientTransport(trust: .system, proxy: settings) }
            #expect(error?.description.contains("hunter2") == false, "\(String(describing: error))")
        }
    }

    @Test("URLSession refuses proxy settings and Unix sockets, naming AsyncHTTPClient")
    func urlSession() async throws {
        let error = #expect(throws: ServerTrustError.self) { _ = try URLSessionTransport(trust: .system, proxy: ProxySettings("p:1")) }
        #expect(error?.description.contains("AsyncHTTPClientTransport") == true)
        var request = try APIRequest(.get, url: #require(URL(string: "http://localhost/api/users")))
        request[option: UnixSocket.self] = "/tmp/none.sock"
        let refused = await #expect(throws: CatenaError.self) { _ = try await URLSessionTransport().load(request) }
        #expect(refused?.code == .invalidRequest && refused?.detail?.contains("AsyncHTTPClientTransport") == true, "\(String(describing: refused))")
    }
}
