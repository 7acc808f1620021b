#if DemoServer
public import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdHTTP2
import HummingbirdTLS
import HummingbirdWSCompression
import HummingbirdWebSocket
import NIOSSL
public import Logging
import NIOCore
import ServiceLifecycle

/// The demo API server: reqres-style users plus routes for testing transports
/// (echo, bytes, status, redirect) and a `delay` query parameter on every route.
///
/// It runs inside the calling process. ``start(host:port:logLevel:)`` binds (port 0
/// picks a free port), waits until the server accepts connections and returns its
/// address; ``RunningDemoServer/stop()`` shuts it down.
public enum DemoServer {
    /// Starts a server and returns once it is listening.
    ///
    /// - Parameter tls: serve HTTPS (and HTTP/2 where the client offers it) with this
    ///   certificate; nil serves plain HTTP/1.1.
    /// - Throws: the bind error when the address cannot be used (a port in use).
    /// - Parameter unixSocket: listen on a Unix domain socket at this path instead of
    ///   `host` and `port` (a file there is replaced); its ``RunningDemoServer/baseURL``
    ///   is then `http://localhost`.
    /// - Parameter webSockets: serve the `/ws/…` routes too (HTTP/1.1 upgrades; not
    ///   with TLS and HTTP/2). Off by default: Hummingbird's upgrading channel answers a
    ///   request that is not HTTP by closing the connection, where the plain one answers
    ///   400, which the suites about hostile input rely on.
    public static func start(
        host: String = "127.0.0.1", port: Int = 0, photos: PhotoSettings = PhotoSettings(),
        tls: DemoTLS? = nil, unixSocket: String? = nil, webSockets: Bool = false, logLevel: Logger.Level = .warning
    ) async throws -> RunningDemoServer {
        var logger = Logger(label: "catena.demo-server")
        logger.logLevel = logLevel
        let (bound, continuation) = AsyncStream.makeStream(of: Int.self)
        let requests = RequestTally()
        if let unixSocket { try? FileManager.default.removeItem(atPath: unixSocket) }
        let address: BindAddress = unixSocket.map { .unixDomainSocket(path: $0) } ?? .hostname(host, port: port)
        let app = try application(address: address, photos: photos, tls: tls, webSockets: webSockets, requests: requests, logger: logger) { boundPort in
            continuation.yield(boundPort)
            continuation.finish()
        }
        var configuration = ServiceGroupConfiguration(services: [.init(service: app)], logger: logger)
        // Escalates to cancelling in-flight handlers (a long ?delay=) after a second.
        // No maximumCancellationDuration: ServiceLifecycle answers an overrun with
        // fatalError, and a test server must never take its process down.
        configuration.maximumGracefulShutdownDuration = .seconds(1)
        let group = ServiceGroup(configuration: configuration)
        let task = Task {
            defer { continuation.finish() }
            try await group.run()
        }
        for await boundPort in bound {
            return RunningDemoServer(
                host: unixSocket == nil ? host : "localhost", port: boundPort, secure: tls != nil, unixSocket: unixSocket,
                requests: requests, group: group, task: task)
        }
        // The stream ended without a port: the server failed to start.
        try await task.value
        throw DemoServerError.stoppedBeforeListening(host: host, port: port)
    }

    /// Runs a server until SIGINT or SIGTERM. `onListening` receives the base URL.
    public static func serve(
        host: String, port: Int, photos: PhotoSettings = PhotoSettings(), tls: DemoTLS? = nil, webSockets: Bool = true,
        logLevel: Logger.Level = .info, onListening: @escaping @Sendable (URL) -> Void
    ) async throws {
        var logger = Logger(label: "catena.demo-server")
        logger.logLevel = logLevel
        let app = try application(
            address: .hostname(host, port: port), photos: photos, tls: tls, webSockets: webSockets, requests: RequestTally(), logger: logger
        ) { boundPort in
            onListening(RunningDemoServer.baseURL(host: host, port: boundPort, secure: tls != nil))
        }
        var configuration = ServiceGroupConfiguration(services: [.init(service: app)], logger: logger)
        configuration.gracefulShutdownSignals = [.sigint, .sigterm]
        configuration.maximumGracefulShutdownDuration = .seconds(2)
        try await ServiceGroup(configuration: configuration).run()
    }

    private static func application(
        address: BindAddress, photos: PhotoSettings, tls: DemoTLS?, webSockets: Bool, requests: RequestTally, logger: Logger,
        onListening: @escaping @Sendable (Int) -> Void
    ) throws -> some ApplicationProtocol {
        let (router, isLiveToken) = DemoRoutes.makeRouter(photos: photos, requests: requests, secure: tls != nil)
        // WebSockets upgrade HTTP/1.1: offered on plain HTTP and on TLS without HTTP/2.
        let upgrading = HTTPServerBuilder.http1WebSocketUpgrade(
            webSocketRouter: WebSocketRoutes.makeRouter(isLiveToken: isLiveToken),
            configuration: .init(
                ws: .init(
                    maxFrameSize: WebSocketRoutes.maximumMessageSize,
                    // permessage-deflate for a client that offers it (Hummingbird's own,
                    // which leaves messages under 256 bytes uncompressed).
                    extensions: [.perMessageDeflate(maxDecompressedFrameSize: WebSocketRoutes.maximumMessageSize)], autoPing: .disabled)))
        let server: HTTPServerBuilder
        if let tls {
            var configuration = TLSConfiguration.makeServerConfiguration(
                certificateChain: try ([tls.certificate.certificateDER] + tls.certificate.intermediatesDER).map {
                    .certificate(try NIOSSLCertificate(bytes: Array($0), format: .der))
                },
                privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(tls.certificate.privateKeyPEM.utf8), format: .pem)))
            if let authority = tls.clientAuthorityDER {
                // Mutual TLS: a client without a certificate of this authority fails the
                // handshake, before any request is read.
                configuration.certificateVerification = .noHostnameVerification
                configuration.trustRoots = .certificates([try NIOSSLCertificate(bytes: Array(authority), format: .der)])
            }
            if tls.http2 {
                // ALPN offers h2 and http/1.1: each client gets what it asks for.
                server = try .http2Upgrade(tlsConfiguration: configuration)
            } else {
                configuration.applicationProtocols = ["http/1.1"]
                server = try .tls(webSockets ? upgrading : .http1(), tlsConfiguration: configuration)
            }
        } else {
            server = webSockets ? upgrading : .http1()
        }
        return Application(
            router: router,
            server: server,
            configuration: .init(address: address, serverName: "catena-demo"),
            onServerRunning: { channel in onListening(channel.localAddress?.port ?? 0) },
            logger: logger
        )
    }
}

/// How the demo server speaks TLS.
public struct DemoTLS: Sendable {
    /// The server's certificate and key (see ``DemoCertificateAuthority/issue(for:validity:)``).
    public var certificate: DemoServerCertificate
    /// Whether ALPN offers HTTP/2 besides HTTP/1.1.
    public var http2: Bool
    /// When set, the server requires a client certificate issued by this authority
    /// (DER; see ``DemoCertificateAuthority/issueClient(named:)``).
    public var clientAuthorityDER: Data?

    public init(certificate: DemoServerCertificate, http2: Bool = true, clientAuthorityDER: Data? = nil) {
        self.certificate = certificate
        self.http2 = http2
        self.clientAuthorityDER = clientAuthorityDER
    }
}

/// Why the demo server could not start.
public enum DemoServerError: Error, CustomStringConvertible {
    case stoppedBeforeListening(host: String, port: Int)

    public var description: String {
        switch self {
        case .stoppedBeforeListening(let host, let port): "the demo server stopped before listening on \(host):\(port)"
        }
    }
}

/// A demo server running in this process.
public final class RunningDemoServer: Sendable {
    /// The host it listens on.
    public let host: String
    /// The port it listens on (the one the system picked, for port 0).
    public let port: Int
    /// `http://host:port` (`https` with TLS), without a trailing slash; over a Unix
    /// socket `http://localhost`.
    public let baseURL: URL
    /// The Unix domain socket it listens on instead of a port, or nil.
    public let unixSocket: String?
    private let requests: RequestTally
    private let group: ServiceGroup
    private let task: Task<Void, any Error>

    /// How many requests it has read so far, whatever their route.
    public var requestsRead: Int { requests.count.load(ordering: .relaxed) }

    init(host: String, port: Int, secure: Bool, unixSocket: String?, requests: RequestTally, group: ServiceGroup, task: Task<Void, any Error>) {
        self.host = host
        self.port = port
        self.unixSocket = unixSocket
        self.requests = requests
        self.baseURL = unixSocket == nil ? Self.baseURL(host: host, port: port, secure: secure) : URL(string: "\(secure ? "https" : "http")://localhost")!
        self.group = group
        self.task = task
    }

    static func baseURL(host: String, port: Int, secure: Bool) -> URL {
        URL(string: "\(secure ? "https" : "http")://\(host.contains(":") ? "[\(host)]" : host):\(port)")!
    }

    /// Stops accepting connections, gives requests in flight a second to finish, then
    /// cancels them; returns when the server is down. Calling it again does nothing.
    public func stop() async {
        await group.triggerGracefulShutdown()
        _ = await task.result
    }
}
#endif  // DemoServer
