import AsyncHTTPClient
import Catena
import CatenaAsyncHTTPClient
import CatenaDemoServer
import Foundation
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import ReqresAPI

/// A company's network: GETs through tinyproxy (CONNECT), raw AsyncHTTPClient with the
/// proxy in its configuration against Catena's chain over a transport given the same
/// proxy as `ProxySettings`; then HTTPS with public-key pins against the same without.
func networkBenchmark(settings: Settings) async throws {
    let quiet = Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() }
    let request = try UserEndpoint(id: 2).makeRequest()
    let decoder = JSONDecoder()
    /// GET /api/users/2 through `chain`, the status checked and the user decoded.
    func chainVariant(_ name: String, _ chain: any HTTPLoader) -> Variant {
        Variant(name: name) { decode in
            let response = try await chain.load(request).validateStatus()
            if decode { _ = try response.decode(SingleUser.self, decoder: decoder) }
        }
    }

    if let proxy = try TinyProxy.start() {
        let server = try await DemoServer.start(logLevel: .error)
        let userURL = server.baseURL.appendingPathComponent("api/users/2").absoluteString
        var configuration = AsyncHTTPClientTransport.defaultConfiguration
        configuration.proxy = .server(host: "127.0.0.1", port: proxy.port)
        let rawClient = HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: configuration)
        let transport = try AsyncHTTPClientTransport(trust: .system, proxy: ProxySettings("127.0.0.1:\(proxy.port)"))
        let chain = EnvironmentMiddleware(ServerEnvironment(baseURL: server.baseURL)!) --> LogMiddleware(logger: quiet) --> transport
        // The same chain over the raw client: what routing to a proxy's client costs, apart.
        let overRaw =
            EnvironmentMiddleware(ServerEnvironment(baseURL: server.baseURL)!) --> LogMiddleware(logger: quiet)
            --> AsyncHTTPClientTransport(client: rawClient, decodesCompression: true)
        print("Through tinyproxy (CONNECT) on 127.0.0.1:\(proxy.port) to the demo server at \(server.baseURL.absoluteString)")
        try await compare(
            [
                [
                    Variant(name: "raw AsyncHTTPClient, proxy in its configuration") { decode in
                        let response = try await rawClient.execute(HTTPClientRequest(url: userURL), timeout: .seconds(30))
                        let body = try await response.body.collect(upTo: 1 << 20)
                        guard response.status == .ok else { throw BenchmarkError.status(Int(response.status.code)) }
                        if decode { _ = try decoder.decode(SingleUser.self, from: body) }
                    },
                    chainVariant("Catena chain, ProxySettings", chain),
                    chainVariant("Catena chain over the raw client (its proxy)", overRaw),
                ]
            ], settings: settings)
        try await rawClient.shutdown()
        try await transport.shutdown()
        await server.stop()
        proxy.stop()
    } else {
        print("Proxy rows skipped: tinyproxy is not installed (apt-get install tinyproxy)")
    }

    let authority = try DemoCertificateAuthority()
    let certificate = try authority.issue()
    let server = try await DemoServer.start(tls: DemoTLS(certificate: certificate), logLevel: .error)
    let environment = ServerEnvironment(baseURL: server.baseURL)!
    let unpinned = try AsyncHTTPClientTransport(trust: ServerTrust(additionalRoots: [authority.certificateDER]))
    let pinned = try AsyncHTTPClientTransport(
        trust: ServerTrust(additionalRoots: [authority.certificateDER], publicKeyPins: ["127.0.0.1": [certificate.publicKeySHA256]]))
    let plainChain = EnvironmentMiddleware(environment) --> LogMiddleware(logger: quiet) --> unpinned
    let pinnedChain = EnvironmentMiddleware(environment) --> LogMiddleware(logger: quiet) --> pinned
    print()
    print("HTTPS + HTTP/2 to \(server.baseURL.absoluteString): a transport with the leaf's key pinned against one without pins")
    try await compare(
        [
            [
                chainVariant("Catena chain, no pins", plainChain),
                chainVariant("Catena chain, public-key pins", pinnedChain),
            ]
        ], settings: settings)
    try await unpinned.shutdown()
    try await pinned.shutdown()
    await server.stop()
}

/// tinyproxy on a free loopback port, without authentication; nil when not installed.
/// Killed with SIGKILL: it inherits this process's blocked signals.
struct TinyProxy {
    let port: Int
    let pid: Int32
    let directory: URL

    static func start() throws -> TinyProxy? {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/tinyproxy") else { return nil }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catena-bench-proxy-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let port = Int.random(in: 20_000..<30_000)
        try "Port \(port)\nListen 127.0.0.1\nMaxClients 400\nLogLevel Error\n".write(
            to: directory.appendingPathComponent("proxy.conf"), atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/tinyproxy")
        process.arguments = ["-d", "-c", directory.appendingPathComponent("proxy.conf").path]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Until it accepts: a connect loop, a few milliseconds.
        for _ in 0..<500 {
            let socket = Foundation.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = UInt16(port).bigEndian
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
            }
            close(socket)
            if connected { return TinyProxy(port: port, pid: process.processIdentifier, directory: directory) }
            usleep(10_000)
        }
        kill(process.processIdentifier, SIGKILL)
        throw BenchmarkError.status(0)
    }

    func stop() {
        kill(pid, SIGKILL)
        try? FileManager.default.removeItem(at: directory)
    }
}
