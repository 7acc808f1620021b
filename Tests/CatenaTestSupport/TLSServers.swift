import AsyncHTTPClient
import Catena
import CatenaAsyncHTTPClient
import CatenaDemoServer
import Foundation
import NIOSSL
import Testing

/// Demo servers over TLS, all with certificates from one throwaway authority: a good
/// one (HTTP/2 and HTTP/1.1 by ALPN), an expired one, one for another host name, and
/// one from an authority nobody trusts.
enum TLSServers {
    static let authority = Result { try DemoCertificateAuthority() }
    private static let stranger = Result { try DemoCertificateAuthority(commonName: "Nobody's CA") }

    private static let good = Task { try await DemoServer.start(tls: DemoTLS(certificate: try authority.get().issue())) }
    private static let expired = Task {
        let past = Date() - 10 * 86_400
        return try await DemoServer.start(tls: DemoTLS(certificate: try authority.get().issue(validity: (past - 86_400)...past)))
    }
    private static let otherHost = Task { try await DemoServer.start(tls: DemoTLS(certificate: try authority.get().issue(for: ["api.example.com"]))) }
    private static let unknownAuthority = Task { try await DemoServer.start(tls: DemoTLS(certificate: try stranger.get().issue())) }
    /// Root → intermediate → leaf: the server sends the leaf and the intermediate.
    static let intermediate = Result { try authority.get().intermediate() }
    static let chainedLeaf = Result { try intermediate.get().issue() }
    private static let chained = Task { try await DemoServer.start(tls: DemoTLS(certificate: try chainedLeaf.get())) }
    private static let chainedExpired = Task {
        let past = Date() - 10 * 86_400
        return try await DemoServer.start(tls: DemoTLS(certificate: try intermediate.get().issue(validity: (past - 86_400)...past)))
    }

    static func runningChained(expired: Bool = false) async throws -> RunningDemoServer {
        expired ? try await chainedExpired.value : try await chained.value
    }

    enum Kind: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case expired, otherHost, unknownAuthority
        var testDescription: String { rawValue }
    }

    static func running() async throws -> RunningDemoServer { try await good.value }

    static func running(_ kind: Kind) async throws -> RunningDemoServer {
        switch kind {
        case .expired: try await expired.value
        case .otherHost: try await otherHost.value
        case .unknownAuthority: try await unknownAuthority.value
        }
    }

    /// Trust in the demo authority, through Catena's API.
    static func trust(excludingSystemRoots: Bool = false) throws -> ServerTrust {
        try ServerTrust(additionalRootsPEM: try authority.get().certificatePEM, excludesSystemRoots: excludingSystemRoots)
    }

    /// The suites' client for HTTPS: Catena's defaults, the demo authority trusted,
    /// 64 connections per host (see `testClient`).
    static let client: HTTPClient = {
        var configuration = AsyncHTTPClientTransport.defaultConfiguration
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 64
        var tls = TLSConfiguration.makeClientConfiguration()
        // swiftlint:disable:next force_try
        let der = try! authority.get().certificateDER
        // swiftlint:disable:next force_try
        tls.additionalTrustRoots = [.certificates([try! NIOSSLCertificate(bytes: Array(der), format: .der)])]
        configuration.tlsConfiguration = tls
        return HTTPClient(eventLoopGroup: .singletonMultiThreadedEventLoopGroup, configuration: AsyncHTTPClientTransport.watching(configuration))
    }()

    /// A chain to `server` through `transport`.
    static func chain(_ server: RunningDemoServer, _ transport: some HTTPLoader) throws -> any HTTPLoader {
        EnvironmentMiddleware(try #require(ServerEnvironment(baseURL: server.baseURL))) --> transport
    }
}
