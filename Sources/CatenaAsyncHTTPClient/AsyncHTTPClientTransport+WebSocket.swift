#if AsyncHTTPClient
import AsyncHTTPClient
import Catena
import Foundation
import HTTPTypes
import NIOCore
import NIOExtras
import NIOFoundationCompat
import NIOHTTP1
import NIOPosix
import NIOSOCKS
import NIOSSL
import NIOTLS
import NIOWebSocket

// AsyncHTTPClient's pool cannot hand over an upgraded connection (it closes on 101), so a
// WebSocket gets a connection of its own, made here the way the pool makes one: the
// same TLS settings, pins, address check, proxies and Unix socket.
extension AsyncHTTPClientTransport {
    /// Opens the connection `request` asks for, sends the upgrade, and answers with the
    /// server's head: a 101 leaves the upgraded connection in `handoff`, any other status
    /// comes back as a response (with up to 64 KiB of its body) for the chain to see.
    func openWebSocket(_ request: APIRequest, handoff: WebSocketUpgrade.Handoff, timeout: Duration) async throws(CatenaError) -> StreamedResponse {
        guard let host = request.host, !host.isEmpty, let scheme = request.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw CatenaError(.invalidRequest, request: request, detail: "a WebSocket needs an http(s) or ws(s) URL with a host")
        }
        // A DNS name has at most 253 bytes; SOCKS5 carries at most 255.
        guard host.utf8.count <= 253 else {
            throw CatenaError(.invalidRequest, request: request, detail: "the host name has \(host.utf8.count) bytes, over the 253 a DNS name may have")
        }
        guard knowsConfiguration else {
            throw CatenaError(
                .invalidRequest, request: request,
                detail: "a transport over an HTTPClient passed in cannot open WebSockets: Catena cannot read that client's TLS and proxy settings. "
                    + "Use AsyncHTTPClientTransport(configuration:) or AsyncHTTPClientTransport(trust:identity:proxy:)")
        }
        if hasOwnProxy, request[option: UnixSocket.self] == nil {
            throw CatenaError(
                .invalidRequest, request: request,
                detail: "a WebSocket cannot go through the configuration's own proxy, which Catena cannot read: give the proxy as ProxySettings")
        }
        let head = upgradeHead(for: request, host: host)
        let deadline = NIODeadline.now() + TimeAmount(timeout)
        let started = ContinuousClock.now
        // The connection as soon as it exists: the deadline and a cancellation close it,
        // whichever step (proxy, TLS, upgrade) it is in.
        let opened = Locked<(channel: (any Channel)?, expiry: Scheduled<Void>?, cancelled: Bool)>((nil, nil, false))
        let adopt: @Sendable (any Channel) -> Void = { channel in
            let expiry = channel.eventLoop.scheduleTask(deadline: deadline) { channel.close(promise: nil) }
            let cancelled = opened.withLock { state in
                state.channel = channel
                state.expiry = expiry
                return state.cancelled
            }
            if cancelled { channel.close(promise: nil) }
        }
        do {
            return try await withTaskCancellationHandler {
                let channel = try await connect(request, host: host, isSecure: scheme == "https", deadline: deadline, adopt: adopt)
                // Its own connection, never pooled: new, ready once TCP, a proxy's tunnel and TLS are done.
                let connection = try await channel.eventLoop.submit {
                    let facts = ConnectionFacts(channel, httpVersion: "1.1", sync: channel.pipeline.syncOperations)
                    return ExchangeWatch.connection(facts.seen, started: started).connection
                }.get()
                request.report(.connection(connection))
                try Task.checkCancellation()
                let outcome = try await upgrade(channel, head: head, maximumFrameSize: handoff.options.maximumMessageSize)
                var response: StreamedResponse
                switch outcome {
                case .upgraded(let response101, let frames):
                    // Upgraded in time: the socket lives as long as it likes from here.
                    opened.withLock { $0.expiry }?.cancel()
                    let (body, _) = handoff.upgradeBody(for: request)
                    response = StreamedResponse(
                        status: .switchingProtocols, headerFields: responseFields(of: response101.headers), body: body, request: request)
                    await handoff.deliver(frames)
                case .refused(let refusal):
                    let (refusedHead, body) = try await refusal.get()
                    response = StreamedResponse(
                        status: Self.status(of: refusedHead.status), headerFields: responseFields(of: refusedHead.headers),
                        body: ResponseBody(Data(buffer: body)), request: request)
                    channel.close(promise: nil)
                }
                request.report(.responseHead(status: Int(response.status.code), after: ContinuousClock.now - started))
                response.timing = ResponseTiming(started: started, headArrived: .now, bodyEnded: .now)
                response.timing?.connection = connection
                return response
            } onCancel: {
                opened.withLock { state in
                    state.cancelled = true
                    return state.channel
                }?.close(promise: nil)
            }
        } catch {
            opened.withLock { $0.channel }?.close(promise: nil)
            if NIODeadline.now() >= deadline, !(error is CatenaError) {
                throw CatenaError(.timedOut, request: request, underlyingError: error, detail: "the WebSocket upgrade took longer than \(timeout)")
            }
            throw Self.mapWebSocket(error, request: request, timeout: timeout)
        }
    }

    /// The upgrade's request head: the request's fields (cookies on one line), its
    /// host, and no Accept-Encoding (a WebSocket has no body to decode).
    private func upgradeHead(for request: APIRequest, host: String) -> HTTPRequestHead {
        var headers = HTTPHeaders()
        let name = host.contains(":") ? "[\(host)]" : host
        let defaultPort = request.scheme?.lowercased() == "https" ? 443 : 80
        headers.add(name: "Host", value: request.port.map { $0 == defaultPort ? name : "\(name):\($0)" } ?? name)
        for field in request.headerFields where field.name != .cookie && !Self.upgradeOwnFields.contains(field.name.canonicalName) {
            headers.add(name: field.name.rawName, value: field.value)
        }
        if let cookie = request.headerFields[.cookie] { headers.add(name: "Cookie", value: cookie) }
        var target = request.percentEncodedPath.isEmpty ? "/" : request.percentEncodedPath
        if let query = request.percentEncodedQuery { target += "?" + query }
        return HTTPRequestHead(version: .http1_1, method: .GET, uri: target, headers: headers)
    }

    /// Fields the upgrade sets itself, or that belong to a hop (a proxy's credentials
    /// never go through its tunnel): a request's own are not sent.
    private static let upgradeOwnFields: Set<String> = [
        "host", "connection", "upgrade", "proxy-authorization", "proxy-connection", "keep-alive", "te", "transfer-encoding",
        "content-length", "sec-websocket-key", "sec-websocket-version", "sec-websocket-accept",
    ]

    /// A connected channel to the server, through the request's proxy or Unix socket,
    /// with TLS set up and checked (pins, the address through a proxy) for https.
    private func connect(
        _ request: APIRequest, host: String, isSecure: Bool, deadline: NIODeadline, adopt: @Sendable (any Channel) -> Void
    ) async throws -> any Channel {
        let port = request.port ?? (isSecure ? 443 : 80)
        let route = routes?.route(of: request)
        let bootstrap = ClientBootstrap(group: client.eventLoopGroup)
            .connectTimeout(max(deadline - .now(), .milliseconds(1)))
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
        let channel: any Channel
        if let socket = request[option: UnixSocket.self] {
            channel = try await bootstrap.connect(unixDomainSocketPath: socket).get()
            adopt(channel)
        } else if let proxy = route?.proxy {
            channel = try await bootstrap.connect(host: proxy.host, port: proxy.port).get()
            adopt(channel)
            do {
                try await tunnel(channel, through: proxy, to: host, port: port, deadline: deadline)
            } catch {
                channel.close(promise: nil)
                throw error
            }
        } else {
            // A ConnectOverride's target: TLS below still names and checks `host`.
            channel = try await bootstrap.connect(host: route?.connect?.target ?? host, port: port).get()
            adopt(channel)
        }
        guard isSecure else { return channel }
        do {
            try await secure(channel, host: host, route: route)
        } catch {
            channel.close(promise: nil)
            throw error
        }
        return channel
    }

    /// Asks the proxy for a tunnel to `host:port` (HTTP CONNECT, or SOCKS5), its
    /// credentials to the proxy alone.
    private func tunnel(_ channel: any Channel, through proxy: ProxySettings.Proxy, to host: String, port: Int, deadline: NIODeadline) async throws {
        let established = channel.eventLoop.makePromise(of: Void.self)
        switch proxy.kind {
        case .http:
            var headers = HTTPHeaders()
            if let credentials = proxy.credentials {
                headers.add(name: "Proxy-Authorization", value: "Basic " + Data("\(credentials.user):\(credentials.password)".utf8).base64EncodedString())
            }
            let target = host.contains(":") ? "[\(host)]" : host
            try await channel.eventLoop.submit { [headers] in
                let operations = channel.pipeline.syncOperations
                try operations.addHandler(HTTPRequestEncoder(), name: "catena-connect-encoder")
                try operations.addHandler(ByteToMessageHandler(HTTPResponseDecoder(leftOverBytesStrategy: .forwardBytes)), name: "catena-connect-decoder")
                try operations.addHandler(
                    NIOHTTP1ProxyConnectHandler(targetHost: target, targetPort: port, headers: headers, deadline: deadline, promise: established))
            }.get()
            try await established.futureResult.get()
            try await channel.pipeline.removeHandler(name: "catena-connect-encoder").get()
            try await channel.pipeline.removeHandler(name: "catena-connect-decoder").get()
        case .socks5:
            let address: SOCKSAddress = IPAddress.bytes(of: host) == nil ? .domain(host, port: port) : .address(try SocketAddress(ipAddress: host, port: port))
            let waiter = EventWaiter(established) { $0 is SOCKSProxyEstablishedEvent }
            try await channel.eventLoop.submit {
                try channel.pipeline.syncOperations.addHandlers([SOCKSClientHandler(targetAddress: address), waiter])
            }.get()
            try await established.futureResult.get()
            try await channel.pipeline.removeHandler(waiter).get()
        }
    }

    /// Adds TLS (ALPN http/1.1 only: an upgrade is HTTP/1.1) and waits for the handshake,
    /// then checks the route's pins and address before any byte of the upgrade is written.
    private func secure(_ channel: any Channel, host: String, route: ClientRoutes.Route?) async throws {
        let context = try webSocketTLSContext(checksAddress: route?.checkedAddress != nil)
        let serverName = IPAddress.bytes(of: host) == nil ? host : nil
        let handshake = channel.eventLoop.makePromise(of: Void.self)
        let waiter = EventWaiter(handshake) { event in
            if case .handshakeCompleted = event as? TLSUserEvent { return true }
            return false
        }
        try await channel.eventLoop.submit {
            try channel.pipeline.syncOperations.addHandlers([try NIOSSLClientHandler(context: context, serverHostname: serverName), waiter])
        }.get()
        try await handshake.futureResult.get()
        try await channel.pipeline.removeHandler(waiter).get()
        if let address = route?.checkedAddress { try await ClientRoutes.addressCheck(address)(channel).get() }
        if let pinned = route?.pinnedHost, let pins = routes?.pins[pinned] { try await ClientRoutes.pinCheck(host: pinned, pins: pins)(channel).get() }
    }

    /// The transport's TLS settings as one context, made once per verification mode.
    private func webSocketTLSContext(checksAddress: Bool) throws -> NIOSSLContext {
        try webSocketContexts.withLock { contexts in
            if let context = contexts[checksAddress] { return context }
            var tls = tlsConfiguration ?? .makeClientConfiguration()
            tls.applicationProtocols = ["http/1.1"]
            // The chain is verified in full; the name check is the route's address check.
            if checksAddress { tls.certificateVerification = .noHostnameVerification }
            let context = try NIOSSLContext(configuration: tls)
            contexts[checksAddress] = context
            return context
        }
    }

    private enum UpgradeOutcome: Sendable {
        case upgraded(HTTPResponseHead, ChannelFrames)
        case refused(EventLoopFuture<(HTTPResponseHead, ByteBuffer)>)
    }

    /// Sends the upgrade with SwiftNIO's WebSocket upgrader (which adds the key and
    /// checks `Sec-WebSocket-Accept`); after a 101 the frames flow to a `ChannelFrames`.
    private func upgrade(_ channel: any Channel, head: HTTPRequestHead, maximumFrameSize: Int) async throws -> UpgradeOutcome {
        let upgrader = NIOTypedWebSocketClientUpgrader<UpgradeOutcome>(
            maxFrameSize: min(maximumFrameSize, Int(UInt32.max)), enableAutomaticErrorHandling: false
        ) { channel, response in
            channel.eventLoop.makeCompletedFuture {
                // Added before the bytes that followed the 101 are passed on.
                let frames = ChannelFrames(channel)
                try channel.pipeline.syncOperations.addHandler(FrameInbox(frames))
                return .upgraded(response, frames)
            }
        }
        let configuration = NIOTypedHTTPClientUpgradeConfiguration<UpgradeOutcome>(upgradeRequestHead: head, upgraders: [upgrader]) { channel in
            channel.eventLoop.makeCompletedFuture {
                let collector = RefusalCollector(promise: channel.eventLoop.makePromise(), limit: 64 * 1024)
                try channel.pipeline.syncOperations.addHandler(collector)
                return .refused(collector.promise.futureResult)
            }
        }
        try await channel.eventLoop.submit { try channel.pipeline.syncOperations.addHandler(EndOneTurnLater()) }.get()
        var pipeline = NIOUpgradableHTTPClientPipelineConfiguration(upgradeConfiguration: configuration)
        // The frames that follow the 101 in the same read are the socket's first: kept.
        pipeline.leftOverBytesStrategy = .forwardBytes
        let outcome = try await channel.eventLoop.submit { [pipeline] in
            try channel.pipeline.syncOperations.configureUpgradableHTTPClientPipeline(configuration: pipeline)
        }.get()
        return try await outcome.get()
    }

    static func mapWebSocket(_ error: any Error, request: APIRequest, timeout: Duration) -> CatenaError {
        if let error = error as? NIOHTTPClientUpgradeError {
            return CatenaError(
                .invalidResponse, request: request, underlyingError: error,
                detail: error == .upgraderDeniedUpgrade
                    ? "the server's 101 does not prove a WebSocket (Sec-WebSocket-Accept is missing or wrong)"
                    : "the server's answer to the WebSocket upgrade broke HTTP (\(error))")
        }
        if let error = error as? NIOHTTP1ProxyConnectHandler.Error {
            return CatenaError(.cannotConnect, request: request, underlyingError: error, detail: "the proxy refused the tunnel (\(error))")
        }
        if error is ChannelPipelineError || (error as? ChannelError) == .inappropriateOperationForState {
            // A handler is gone only once the channel was torn down: the server closed it
            // (a TLS 1.3 server refusing the client's certificate does, after the handshake).
            // NIO's upgrade handler, removed with the pipeline, fails its promise with the latter.
            return CatenaError(.connectionLost, request: request, underlyingError: error, detail: "the connection ended during the WebSocket handshake")
        }
        if error is HTTPParserError {
            return CatenaError(
                .invalidResponse, request: request, underlyingError: error, detail: "the server's answer to the WebSocket upgrade is not HTTP (\(error))")
        }
        return map(error, request: request, timeout: timeout, limit: 64 * 1024)
    }
}

/// Passes the connection's end on one event-loop turn later, ahead of the HTTP decoder.
/// A server may send its 101, its whole conversation and its close in one burst and
/// close: NIO then reads the end in the same wake-up as the 101 (a FIN is read until
/// EOF), while the decoder's removal, which forwards the bytes after the 101, runs a
/// turn later, and a decoder that has seen the end drops them.
private final class EndOneTurnLater: ChannelInboundHandler, Sendable {
    typealias InboundIn = NIOAny

    func channelInactive(context: ChannelHandlerContext) {
        // Queued after the removal that the 101 started, and before the pipeline's teardown.
        context.eventLoop.assumeIsolated().execute { context.fireChannelInactive() }
    }
}

/// Fulfils its promise on the first inbound user event `matches` accepts; fails it when
/// an error or the channel's end comes first.
private final class EventWaiter: ChannelInboundHandler, RemovableChannelHandler, Sendable {
    typealias InboundIn = NIOAny
    private let promise: EventLoopPromise<Void>
    private let matches: @Sendable (Any) -> Bool

    init(_ promise: EventLoopPromise<Void>, matches: @escaping @Sendable (Any) -> Bool) {
        self.promise = promise
        self.matches = matches
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if matches(event) { promise.succeed() }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise.fail(error)
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(ChannelError.eof)
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        promise.fail(ChannelError.eof)
    }
}

/// Gathers a refused upgrade's answer: its head and up to `limit` bytes of its body.
private final class RefusalCollector: ChannelInboundHandler, Sendable {
    typealias InboundIn = HTTPClientResponsePart
    let promise: EventLoopPromise<(HTTPResponseHead, ByteBuffer)>
    private let limit: Int
    private let state = Locked<(head: HTTPResponseHead?, body: ByteBuffer)>((nil, ByteBuffer()))

    init(promise: EventLoopPromise<(HTTPResponseHead, ByteBuffer)>, limit: Int) {
        self.promise = promise
        self.limit = limit
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            state.withLock { $0.head = head }
        case .body(var chunk):
            let full = state.withLock { state -> Bool in
                let room = limit - state.body.readableBytes
                if room > 0, let slice = chunk.readSlice(length: min(room, chunk.readableBytes)) { state.body.writeImmutableBuffer(slice) }
                return state.body.readableBytes >= limit
            }
            if full { finish() }
        case .end:
            finish()
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if state.withLock({ $0.head }) == nil { promise.fail(error) } else { finish() }
    }

    private func finish() {
        let (head, body) = state.withLock { ($0.head, $0.body) }
        if let head { promise.succeed((head, body)) } else { promise.fail(ChannelError.eof) }
    }
}
#endif  // AsyncHTTPClient
