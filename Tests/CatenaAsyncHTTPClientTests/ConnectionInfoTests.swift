import AsyncHTTPClient
import Catena
import CatenaDemoServer
import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Testing
@testable import CatenaAsyncHTTPClient
@testable import CatenaTestSupport

/// Each exchange's connection as AsyncHTTPClient's pipeline shows it (`ExchangeWatch`):
/// on the response's timing and as a `connection` event, against the demo server, a
/// server that holds its TLS handshake, and nginx over TLS with HTTP/2 and HTTP/1.1.
@Suite("Each exchange's connection", .timeLimit(.minutes(2)))
struct ConnectionInfoTests {
    /// A request to `url` whose events land in `events`.
    private static func request(_ url: URL, _ events: Locked<[CallEvent]>) -> APIRequest {
        var request = APIRequest(.get, url: url)
        request.observe(CallObserver { event in events.withLock { $0.append(event) } })
        return request
    }

    /// The `connection` events among `events`, and whether each came just before a `responseHead`.
    private static func connections(_ events: [CallEvent]) -> [(ConnectionInfo, beforeHead: Bool)] {
        events.indices.compactMap { index in
            guard case .connection(let info) = events[index] else { return nil }
            let next = index + 1 < events.count ? events[index + 1] : nil
            if case .responseHead = next { return (info, true) }
            return (info, false)
        }
    }

    @Test("plain HTTP/1.1: the first call opens a connection, the next reuses it; each reported once, before its head")
    func plain() async throws {
        let server = try await TestServer.running()
        let transport = AsyncHTTPClientTransport(configuration: AsyncHTTPClientTransport.defaultConfiguration)
        defer { Task { try? await transport.shutdown() } }
        let events = Locked<[CallEvent]>([])
        let url = server.baseURL.appending(path: "api/echo")
        let first = try await transport.load(Self.request(url, events))
        let second = try await transport.load(Self.request(url, events))
        let opened = try #require(first.timing?.connection)
        #expect(!opened.isReused)
        let ready = try #require(opened.readyAfter)
        let firstByte = try #require(first.timing?.timeToFirstByte)
        #expect(ready <= firstByte)
        #expect(opened.remoteAddress == "127.0.0.1")
        #expect(opened.remotePort == server.port)
        #expect(opened.httpVersion == "1.1")
        #expect(opened.tlsVersion == nil)
        let sent = try #require(first.timing?.requestSent)
        #expect(sent >= ready && sent <= firstByte)
        let reused = try #require(second.timing?.connection)
        #expect(reused.isReused)
        #expect(reused.readyAfter == nil)
        #expect(reused.remotePort == server.port)
        let reported = Self.connections(events.withLock { $0 })
        #expect(reported.map(\.0) == [opened, reused])
        #expect(reported.allSatisfy { $0.beforeHead })
    }

    @Test("the mark never reaches the server, also when the caller sends a field of its name")
    func markStripped() async throws {
        let server = try await TestServer.running()
        let transport = AsyncHTTPClientTransport(configuration: AsyncHTTPClientTransport.defaultConfiguration)
        defer { Task { try? await transport.shutdown() } }
        for field in [nil, "forged", "12"] {
            var request = APIRequest(.get, url: server.baseURL.appending(path: "api/echo"))
            if let field { request.headerFields[HTTPField.Name(ExchangeWatch.fieldName)!] = field }
            let response = try await transport.load(request)
            let echo = try JSONDecoder().decode(Echo.self, from: response.body)
            #expect(echo.header(ExchangeWatch.fieldName) == nil, "\(echo.headers)")
            #expect(response.timing?.connection != nil)
        }
        // Streamed, through both of the streaming paths.
        let streamed = try await transport.stream(APIRequest(.get, url: server.baseURL.appending(path: "api/echo")))
        let echo = try JSONDecoder().decode(Echo.self, from: try await streamed.collect().body)
        #expect(echo.header(ExchangeWatch.fieldName) == nil)
        #expect(streamed.timing?.connection?.isReused == true)
    }

    @Test("a client passed in is not watched: no mark goes out and no connection is reported")
    func clientPassedIn() async throws {
        let server = try await TestServer.running()
        let client = HTTPClient(eventLoopGroup: .singletonMultiThreadedEventLoopGroup, configuration: AsyncHTTPClientTransport.defaultConfiguration)
        defer { Task { try? await client.shutdown() } }
        let transport = AsyncHTTPClientTransport(client: client)
        let events = Locked<[CallEvent]>([])
        let response = try await transport.load(Self.request(server.baseURL.appending(path: "api/echo"), events))
        #expect(try JSONDecoder().decode(Echo.self, from: response.body).header(ExchangeWatch.fieldName) == nil)
        #expect(response.timing != nil)
        #expect(response.timing?.connection == nil)
        #expect(Self.connections(events.withLock { $0 }).isEmpty)
    }

    @Test("HTTPS to the demo server: HTTP/2 and TLS 1.3 by ALPN, streams of one connection; HTTP/1.1 where only it is offered")
    func tls() async throws {
        let trust = try TLSServers.trust()
        let h2 = try await TLSServers.running()
        let transport = try AsyncHTTPClientTransport(trust: trust)
        defer { Task { try? await transport.shutdown() } }
        let first = try await transport.load(APIRequest(.get, url: h2.baseURL.appending(path: "api/echo")))
        let streamed = try await transport.stream(APIRequest(.get, url: h2.baseURL.appending(path: "api/echo")))
        _ = try await streamed.collect()
        let opened = try #require(first.timing?.connection)
        #expect(
            opened
                == ConnectionInfo(
                    isReused: false, readyAfter: opened.readyAfter, remoteAddress: "127.0.0.1", remotePort: h2.port, localPort: opened.localPort,
                    httpVersion: "2",
                    tlsVersion: "TLSv1.3"))
        #expect(opened.localPort != nil && opened.localPort != h2.port)
        #expect(opened.readyAfter != nil)
        let stream = try #require(streamed.timing?.connection)
        #expect(stream.isReused && stream.httpVersion == "2" && stream.readyAfter == nil)

        let h1 = try await DemoServer.start(tls: DemoTLS(certificate: try TLSServers.authority.get().issue(), http2: false))
        defer { Task { await h1.stop() } }
        let one = try await transport.load(APIRequest(.get, url: h1.baseURL.appending(path: "api/echo")))
        let info = try #require(one.timing?.connection)
        #expect(info.httpVersion == "1.1" && info.tlsVersion == "TLSv1.3" && !info.isReused && info.remotePort == h1.port)
    }

    @Test("a held TLS handshake shows in the connection's set-up; a held head only in the wait for it")
    func phases() async throws {
        let certificate = try TLSServers.authority.get().issue()
        let slow = try await SlowHandshakeServer.start(delay: .milliseconds(300), certificate: certificate)
        defer { slow.stop() }
        let transport = try AsyncHTTPClientTransport(trust: TLSServers.trust())
        defer { Task { try? await transport.shutdown() } }
        let first = try await transport.load(APIRequest(.get, url: URL(string: "https://127.0.0.1:\(slow.port)/")!))
        #expect(first.body == Data("ok".utf8))
        let ready = try #require(first.timing?.connection?.readyAfter)
        #expect(ready >= .milliseconds(290))
        #expect(first.timing?.connection?.tlsVersion != nil)

        // A reused connection to the demo server, whose head is held 0.3 s: no set-up, all wait.
        let server = try await TestServer.running()
        let plain = AsyncHTTPClientTransport(configuration: AsyncHTTPClientTransport.defaultConfiguration)
        defer { Task { try? await plain.shutdown() } }
        _ = try await plain.load(APIRequest(.get, url: server.baseURL.appending(path: "api/echo")))
        var drip = URLComponents(url: server.baseURL.appending(path: "api/drip"), resolvingAgainstBaseURL: false)!
        drip.queryItems = [URLQueryItem(name: "delay", value: "0.3"), URLQueryItem(name: "chunks", value: "1")]
        let held = try await plain.load(APIRequest(.get, url: drip.url!))
        #expect(held.timing?.connection?.isReused == true)
        #expect(held.timing?.connection?.readyAfter == nil)
        let wait = try #require(held.timing?.timeToFirstByte)
        #expect(wait >= .milliseconds(290))
    }

    @Test(
        "nginx over TLS sees the version, address and port the connection reports, over HTTP/2 and HTTP/1.1",
        .enabled(if: NginxProcess.testsRun), arguments: [true, false])
    func nginx(http2: Bool) async throws {
        let certificate = try TLSServers.authority.get().issue()
        let nginx = try await NginxProcess.start(
            locations: #"location /seen { default_type text/plain; return 200 "$server_protocol $ssl_protocol $server_addr $server_port"; }"#,
            tls: .init(certificatePEM: certificate.certificatePEM, privateKeyPEM: certificate.privateKeyPEM, http2: http2))
        defer { nginx.stop() }
        let transport = try AsyncHTTPClientTransport(trust: TLSServers.trust())
        defer { Task { try? await transport.shutdown() } }
        let url = URL(string: "https://127.0.0.1:\(nginx.port)/seen")!
        let first = try await transport.load(APIRequest(.get, url: url))
        let second = try await transport.load(APIRequest(.get, url: url))
        let seen = String(decoding: first.body, as: UTF8.self).split(separator: " ").map(String.init)
        let info = try #require(first.timing?.connection)
        #expect(seen == ["HTTP/\(http2 ? "2.0" : "1.1")", info.tlsVersion ?? "none", info.remoteAddress ?? "none", String(info.remotePort ?? 0)])
        #expect(info.httpVersion == (http2 ? "2" : "1.1"))
        #expect(!info.isReused && info.readyAfter != nil)
        #expect(second.timing?.connection?.isReused == true)
    }

    @Test("URLSession on Linux reports no connection (corelibs delivers no task metrics)")
    func urlSession() async throws {
        #if canImport(FoundationNetworking)
        let server = try await TestServer.running()
        let events = Locked<[CallEvent]>([])
        let response = try await URLSessionTransport().load(Self.request(server.baseURL.appending(path: "api/echo"), events))
        #expect(response.timing != nil)
        #expect(response.timing?.connection == nil && response.timing?.requestSent == nil)
        #expect(Self.connections(events.withLock { $0 }).isEmpty)
        #endif
    }

    @Test("the watch's rules: a late publish is ignored, a drop forgets, waiting makes an exchange new")
    func watchBookkeeping() {
        let watch = ExchangeWatch()
        let started = ContinuousClock.now
        let seen = ExchangeWatch.Seen(isFirst: true, readyAt: started + .milliseconds(5), httpVersion: "1.1")
        let a = watch.begin(), b = watch.begin()
        #expect(watch.pending == 2)
        #expect(watch.end(a, started: started) == nil, "nothing published: no connection")
        watch.publish(a, seen)
        #expect(watch.pending == 1, "a publish after the end adds nothing")
        watch.publish(b, seen)
        #expect(watch.end(b, started: started)?.connection == ConnectionInfo(isReused: false, readyAfter: .milliseconds(5), httpVersion: "1.1"))
        // A connection ready before the exchange began: reused, unless this is its first exchange.
        for (first, reused) in [(true, false), (false, true)] {
            let mark = watch.begin()
            watch.publish(mark, ExchangeWatch.Seen(isFirst: first, readyAt: started - .seconds(1), httpVersion: "2"))
            let connection = watch.end(mark, started: started)?.connection
            #expect(connection?.isReused == reused && connection?.readyAfter == nil)
        }
        // An HTTP/2 stream queued behind the handshake waited for it: new, with its wait.
        let queued = watch.begin()
        watch.publish(queued, ExchangeWatch.Seen(isFirst: false, readyAt: started + .milliseconds(7), httpVersion: "2"))
        #expect(watch.end(queued, started: started)?.connection == ConnectionInfo(isReused: false, readyAfter: .milliseconds(7), httpVersion: "2"))
        // An HTTP/1.1 connection made while this exchange waited, but first used by another: reused.
        let pooled = watch.begin()
        watch.publish(pooled, ExchangeWatch.Seen(isFirst: false, readyAt: started + .milliseconds(7), httpVersion: "1.1"))
        #expect(watch.end(pooled, started: started)?.connection == ConnectionInfo(isReused: true, httpVersion: "1.1"))
        let d = watch.begin()
        watch.drop(d)
        #expect(watch.pending == 0)
    }

    @Test("two calls waiting for one HTTP/1.1 connection: the first opens it, the second reuses it")
    func oneConnectionTwoCalls() async throws {
        let server = try await DemoServer.start()
        defer { Task { await server.stop() } }
        var configuration = AsyncHTTPClientTransport.defaultConfiguration
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 1
        let transport = AsyncHTTPClientTransport(configuration: configuration)
        defer { Task { try? await transport.shutdown() } }
        let url = server.baseURL.appending(path: "api/echo")
        async let first = transport.load(APIRequest(.get, url: url))
        async let second = transport.load(APIRequest(.get, url: url))
        let connections = try await [first, second].compactMap { $0.timing?.connection }
        #expect(connections.count == 2)
        #expect(connections.filter(\.isReused).count == 1, "\(connections)")
        #expect(connections.filter { $0.readyAfter != nil }.count == 1, "only the opener waited for the set-up: \(connections)")
        #expect(Set(connections.map(\.localPort)).count == 1, "one connection")
    }

    @Test("no exchange stays registered: answered, failed, timed out, cancelled, on every path of the transport")
    func nothingStays() async throws {
        let watch = ExchangeWatch()
        let client = HTTPClient(
            eventLoopGroup: .singletonMultiThreadedEventLoopGroup,
            configuration: ExchangeWatch.watching(AsyncHTTPClientTransport.defaultConfiguration, into: watch))
        defer { Task { try? await client.shutdown() } }
        let transport = AsyncHTTPClientTransport(watchedClient: client, watch: watch, timeout: .seconds(10))
        let server = try await TestServer.running()
        let echo = server.baseURL.appending(path: "api/echo")
        var streamedBody = APIRequest(.post, url: echo)
        streamedBody.body = .stream(length: 3) {
            AsyncThrowingStream {
                $0.yield(Data("abc".utf8)); $0.finish()
            }
        }
        // The buffered delegate path, execute + collect (a streamed request body), and both streaming paths.
        #expect(try await transport.load(APIRequest(.get, url: echo)).timing?.connection != nil)
        #expect(try await transport.load(streamedBody).timing?.connection != nil)
        #expect(try await transport.stream(APIRequest(.get, url: echo)).timing?.connection != nil)
        #expect(try await transport.stream(streamedBody).timing?.connection != nil)
        // A refused connection, a 404, a head that comes too late, and calls cancelled while they wait.
        let port = try await TestServer.closedPort()
        await #expect(throws: CatenaError.self) { try await transport.load(APIRequest(.get, url: URL(string: "http://127.0.0.1:\(port)/")!)) }
        #expect(try await transport.load(APIRequest(.get, url: server.baseURL.appending(path: "api/status/404"))).status == .notFound)
        var drip = URLComponents(url: server.baseURL.appending(path: "api/drip"), resolvingAgainstBaseURL: false)!
        drip.queryItems = [URLQueryItem(name: "delay", value: "2"), URLQueryItem(name: "chunks", value: "1")]
        var late = APIRequest(.get, url: drip.url!)
        late[option: RequestTimeout.self] = .milliseconds(200)
        await #expect(throws: CatenaError.self) { try await transport.load(late) }
        await #expect(throws: CatenaError.self) { try await transport.stream(late) }
        let held = try #require(drip.url)
        for streaming in [false, true] {
            let call = Task {
                streaming ? try await transport.stream(APIRequest(.get, url: held)).status : try await transport.load(APIRequest(.get, url: held)).status
            }
            try await Task.sleep(for: .milliseconds(100))
            call.cancel()
            _ = await call.result
        }
        #expect(watch.pending == 0)
    }
}

/// A TLS server that leaves each new connection's ClientHello unread for `delay`, then
/// answers every request with 200 "ok" over HTTP/1.1: a handshake that takes its time.
private final class SlowHandshakeServer: Sendable {
    let port: Int
    private let channel: any Channel

    private init(port: Int, channel: any Channel) {
        self.port = port
        self.channel = channel
    }

    static func start(delay: TimeAmount, certificate: DemoServerCertificate) async throws -> SlowHandshakeServer {
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(try NIOSSLCertificate(bytes: Array(certificate.certificatePEM.utf8), format: .pem))],
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(certificate.privateKeyPEM.utf8), format: .pem)))
        tls.applicationProtocols = ["http/1.1"]
        let context = try NIOSSLContext(configuration: tls)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                // Nothing is read before the handlers are in: the ClientHello waits in the kernel.
                channel.eventLoop.scheduleTask(in: delay) {}.futureResult.flatMapThrowing {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOSSLServerHandler(context: context))
                    try sync.configureHTTPServerPipeline()
                    try sync.addHandler(OK())
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return SlowHandshakeServer(port: channel.localAddress?.port ?? 0, channel: channel)
    }

    func stop() {
        channel.close(promise: nil)
    }

    private final class OK: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .end = unwrapInboundIn(data) else { return }
            var headers = HTTPHeaders()
            headers.add(name: "Content-Length", value: "2")
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: "ok")))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }
}
