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

/// HTTPS to the demo server over TLS (HTTP/2 by ALPN): raw AsyncHTTPClient against
/// Catena's chain over the same client (so the same pooled TLS connection), sequential
/// and in flight; then the time to the first response on a new TLS connection.
func httpsBenchmark(settings: Settings) async throws {
    let authority = try DemoCertificateAuthority()
    let server = try await DemoServer.start(tls: DemoTLS(certificate: try authority.issue()), logLevel: .error)
    let base = server.baseURL
    let userURL = base.appendingPathComponent("api/users/2").absoluteString
    let trust = ServerTrust(additionalRoots: [authority.certificateDER])
    var configuration = AsyncHTTPClientTransport.defaultConfiguration
    var tls = TLSConfiguration.makeClientConfiguration()
    tls.additionalTrustRoots = [.certificates([try NIOSSLCertificate(bytes: Array(authority.certificateDER), format: .der)])]
    configuration.tlsConfiguration = tls
    // `--loops N`: the client on a group of its own (with one loop, a call's delegate
    // always runs on its connection's loop).
    let clientGroup = settings.loops.map { MultiThreadedEventLoopGroup(numberOfThreads: $0) }
    let rawClient = HTTPClient(eventLoopGroup: clientGroup ?? MultiThreadedEventLoopGroup.singleton, configuration: configuration)
    let quiet = Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() }
    let chain =
        EnvironmentMiddleware(ServerEnvironment(baseURL: base)!) --> LogMiddleware(logger: quiet)
        --> AsyncHTTPClientTransport(client: rawClient, decodesCompression: true)
    let request = try UserEndpoint(id: 2).makeRequest()
    let decoder = JSONDecoder()
    let group = [
        Variant(name: "raw AsyncHTTPClient, HTTPS + HTTP/2") { decode in
            let response = try await rawClient.execute(HTTPClientRequest(url: userURL), timeout: .seconds(30))
            let body = try await response.body.collect(upTo: 1 << 20)
            guard response.status == .ok else { throw BenchmarkError.status(Int(response.status.code)) }
            if decode { _ = try decoder.decode(SingleUser.self, from: body) }
        },
        Variant(name: "Catena chain (log + environment), HTTPS + HTTP/2") { decode in
            let response = try await chain.load(request).validateStatus()
            if decode { _ = try response.decode(SingleUser.self, decoder: decoder) }
        },
    ]
    let loops = settings.loops.map { ", the client on \($0) event loop\($0 == 1 ? "" : "s") of its own" } ?? ""
    print("HTTPS: demo server with a throwaway CA at \(base.absoluteString), HTTP/2 by ALPN\(loops)")
    try await compare([group], settings: settings)

    // A new client per call, so every call makes its TCP connection and TLS handshake.
    let rounds = max(20, settings.rounds * 4)
    var raw: [Double] = [], catena: [Double] = []
    for round in 0..<rounds {
        for variant in round % 2 == 0 ? ["raw", "catena"] : ["catena", "raw"] {
            let start = ContinuousClock.now
            if variant == "raw" {
                let client = HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: configuration)
                let response = try await client.execute(HTTPClientRequest(url: userURL), timeout: .seconds(30))
                raw.append((ContinuousClock.now - start).milliseconds)
                _ = try await response.body.collect(upTo: 1 << 20)
                try await client.shutdown()
            } else {
                let transport = try AsyncHTTPClientTransport(trust: trust)
                let response = try await transport.stream(try APIRequest(.get, urlString: userURL))
                catena.append((ContinuousClock.now - start).milliseconds)
                _ = try await response.collect()
                try await transport.shutdown()
            }
        }
    }
    print()
    print("| first response head on a new TLS connection (\(rounds) alternating rounds, client made per call) | median ms | p90 ms |")
    print("|---|---:|---:|")
    for (name, values) in [("raw AsyncHTTPClient", raw), ("Catena transport with ServerTrust", catena)] {
        let sorted = values.sorted()
        print("| \(name) | \(format(median(sorted), 2)) | \(format(sorted[min(sorted.count - 1, sorted.count * 9 / 10)], 2)) |")
    }
    try await rawClient.shutdown()
    try await clientGroup?.shutdownGracefully()
    await server.stop()
}
