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

    @Test("the watch's field is never handed over; a server's own field of its name is replaced, on every path")
    func serverFieldReplaced() async throws {
        let faults = try await FaultServer.running()
        let transport = AsyncHTTPClientTransport(configuration: AsyncHTTPClientTransport.defaultConfiguration)
        defer { Task { try? await transport.shutdown() } }
        let url = faults.baseURL.appending(path: MisbehavingServer.Fault.forgedConnection.rawValue)
        var streamedBody = APIRequest(.post, url: url)
        streamedBody.body = .stream(length: 3) {
            AsyncThrowingStream {
                $0.yield(Data("abc".utf8)); $0.finish()
            }
        }
        // The buffered delegate path, execute + collect (a streamed request body), and both streaming paths.
        var answers: [(fields: HTTPFields, timing: ResponseTiming?)] = []
        for request in [APIRequest(.get, url: url), streamedBody] {
            let loaded = try await transport.load(request)
            answers.append((loaded.headerFields, loaded.timing))
            let streamed = try await transport.stream(request)
            answers.append((streamed.headerFields, streamed.timing))
            _ = try await streamed.collect()
        }
        for answer in answers {
            #expect(answer.fields[HTTPField.Name(ExchangeWatch.fieldName)!] == nil, "\(answer.fields)")
            let connection = try #require(answer.timing?.connection)
            #expect(connection.remoteAddress == "127.0.0.1" && connection.remotePort == faults.port && connection.tlsVersion == nil)
        }
        // A transport over the same client, passed in, reads and drops the field too.
        let over = try await AsyncHTTPClientTransport(client: transport.client, decodesCompression: true).load(APIRequest(.get, url: url))
        #expect(over.headerFields[HTTPField.Name(ExchangeWatch.fieldName)!] == nil)
        #expect(over.timing?.connection?.remotePort == faults.port)
        // Nothing of the watch goes out with the request.
        let server = try await TestServer.running()
        let echo = try JSONDecoder().decode(Echo.self, from: try await transport.load(APIRequest(.get, url: server.baseURL.appending(path: "api/echo"))).body)
        #expect(echo.headers.keys.allSatisfy { !$0.lowercased().hasPrefix("catena-") }, "\(echo.headers)")
    }

    @Test("a client passed in is not watched: a server's field of the watch's name stays as sent, and no connection is reported")
    func clientPassedIn() async throws {
        let faults = try await FaultServer.running()
        let client = HTTPClient(eventLoopGroup: .singletonMultiThreadedEventLoopGroup, configuration: AsyncHTTPClientTransport.defaultConfiguration)
        defer { Task { try? await client.shutdown() } }
        let transport = AsyncHTTPClientTransport(client: client)
        #expect(ExchangeWatch.seen(in: MisbehavingServer.forgedConnectionField) != nil, "the forgery reads as a connection")
        let events = Locked<[CallEvent]>([])
        let response = try await transport.load(Self.request(faults.baseURL.appending(path: MisbehavingServer.Fault.forgedConnection.rawValue), events))
        #expect(response.headerFields[values: HTTPField.Name(ExchangeWatch.fieldName)!] == Array(repeating: MisbehavingServer.forgedConnectionField, count: 2))
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

    @Test("a watched transport drops the field in any case, also from heads no handler saw (a WebSocket's); others keep it")
    func droppedInAnyCase() {
        let headers = HTTPHeaders([("Catena-Connection", "1"), ("CATENA-CONNECTION", "2"), ("catena-connection", "3"), ("catena-connections", "4")])
        #expect(AsyncHTTPClientTransport.fields(of: headers, dropping: ExchangeWatch.lowercaseName).map(\.value) == ["4"])
        #expect(AsyncHTTPClientTransport.fields(of: headers).map(\.value) == ["1", "2", "3", "4"])
    }

    @Test("the watch's rules: waiting makes an exchange new, a pooled connection another call opened is reused")
    func watchRules() {
        let started = ContinuousClock.now
        func seen(_ first: Bool, _ readyAt: ContinuousClock.Instant, _ version: String) -> ExchangeWatch.Seen {
            ExchangeWatch.Seen(isFirst: first, readyAt: readyAt, httpVersion: version)
        }
        #expect(
            ExchangeWatch.connection(seen(true, started + .milliseconds(5), "1.1"), started: started).connection
                == ConnectionInfo(isReused: false, readyAfter: .milliseconds(5), httpVersion: "1.1"))
        // A connection ready before the exchange began: reused, unless this is its first exchange.
        for (first, reused) in [(true, false), (false, true)] {
            let connection = ExchangeWatch.connection(seen(first, started - .seconds(1), "2"), started: started).connection
            #expect(connection.isReused == reused && connection.readyAfter == nil)
        }
        // An HTTP/2 stream queued behind the handshake waited for it: new, with its wait.
        #expect(
            ExchangeWatch.connection(seen(false, started + .milliseconds(7), "2"), started: started).connection
                == ConnectionInfo(isReused: false, readyAfter: .milliseconds(7), httpVersion: "2"))
        // An HTTP/1.1 connection made while this exchange waited, but first used by another: reused.
        #expect(
            ExchangeWatch.connection(seen(false, started + .milliseconds(7), "1.1"), started: started).connection
                == ConnectionInfo(isReused: true, httpVersion: "1.1"))
        // The send time from the exchange's start; none when the head came before the request's end.
        var sent = seen(true, started, "1.1")
        sent.requestSent = started + .milliseconds(3)
        #expect(ExchangeWatch.connection(sent, started: started).requestSent == .milliseconds(3))
        sent.requestSent = nil
        #expect(ExchangeWatch.connection(sent, started: started).requestSent == nil)
    }

    @Test("the watch's field reads back what it was made of, for random connections")
    func fieldRoundTrip() {
        var random = SystemRandomNumberGenerator()
        let addresses = ["127.0.0.1", "::1", "fe80::1%eth0", "2001:db8::7", "192.0.2.1"]
        func maybe<T>(_ value: T) -> T? { Bool.random(using: &random) ? value : nil }
        for _ in 0..<2_000 {
            let seen = ExchangeWatch.Seen(
                isFirst: Bool.random(using: &random),
                readyAt: ExchangeWatch.epoch + .nanoseconds(Int64.random(in: -1_000_000_000_000...1_000_000_000_000, using: &random)),
                requestSent: maybe(ExchangeWatch.epoch + .nanoseconds(Int64.random(in: 0...Int64(Int32.max), using: &random))),
                httpVersion: ["1.1", "2"].randomElement(using: &random)!, tlsVersion: maybe(["TLSv1.2", "TLSv1.3"].randomElement(using: &random)!),
                remoteAddress: maybe(addresses.randomElement(using: &random)!), remotePort: maybe(Int.random(in: 0...65535, using: &random)),
                localPort: maybe(Int.random(in: 0...65535, using: &random)))
            #expect(ExchangeWatch.seen(in: ExchangeWatch.value(of: seen)) == seen)
        }
    }

    @Test("anything else in the field is no connection, never a trap: cut, padded, mutated, random bytes")
    func fieldHostile() {
        var random = SystemRandomNumberGenerator()
        let good = ExchangeWatch.value(
            of: ExchangeWatch.Seen(isFirst: true, readyAt: ExchangeWatch.epoch, httpVersion: "1.1", remoteAddress: "127.0.0.1", remotePort: 80, localPort: 5000)
        )
        #expect(ExchangeWatch.seen(in: good) != nil)
        let bad = [
            "", " ", "1", good + " ", " " + good, good.replacingOccurrences(of: " ", with: "  "), "2" + good.dropFirst(), "1 x" + good.dropFirst(3),
            "1 - 99999999999999999999 1.1 - - - -", "1 - 0  - - - -", "1 - 0 1.1 - - 80x -", "1 - 0 1.1 - - - - -",
            MisbehavingServer.forgedConnectionField + " 3",
        ]
        for text in bad {
            #expect(ExchangeWatch.seen(in: text) == nil, "\(text)")
        }
        for _ in 0..<5_000 {
            var bytes = Array(good.utf8)
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                switch Int.random(in: 0...2, using: &random) {
                case 0 where !bytes.isEmpty: bytes.remove(at: Int.random(in: bytes.indices, using: &random))
                case 1: bytes.insert(UInt8.random(in: 0...255, using: &random), at: Int.random(in: 0...bytes.count, using: &random))
                default: if !bytes.isEmpty { bytes[Int.random(in: bytes.indices, using: &random)] = UInt8.random(in: 32...126, using: &random) }
                }
            }
            // Whatever it reads, it reads only what value(of:) writes back unchanged.
            let text = String(decoding: bytes, as: UTF8.self)
            if let seen = ExchangeWatch.seen(in: text) { #expect(ExchangeWatch.value(of: seen) == text, "\(text)") }
        }
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
