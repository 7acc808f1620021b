#if AsyncHTTPClient
public import AsyncHTTPClient
public import Catena
import Foundation
import HTTPTypes
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import NIOHTTP2
import NIOHTTPCompression
import NIOPosix
import NIOSSL
import Synchronization
import Tracing

/// A transport that sends requests with AsyncHTTPClient: the default on Linux, with a
/// connection pool that holds up under concurrency.
///
/// Three ways to get one:
/// - ``init(timeout:)`` shares one process-wide client with Catena's defaults; nothing
///   to shut down.
/// - `init(client:timeout:)` uses your `HTTPClient`; you shut it down.
/// - ``init(configuration:timeout:)`` owns a client: call ``shutdown()`` when done
///   (or use ``withTransport(configuration:timeout:_:)``, which always does).
///
/// Catena's default configuration differs from AsyncHTTPClient's in three ways:
/// - a connection that cannot be established fails the request at once
///   (`retryConnectionEstablishment = false`) instead of retrying with backoff until the
///   request's deadline, so a refused connection reports
///   `CatenaError/Code/cannotConnect` in milliseconds. Put a retry loader in the
///   chain to retry on purpose;
/// - gzip and deflate bodies are decoded (and asked for with `Accept-Encoding`), with a
///   ratio limit against compression bombs, as URLSession does;
/// - redirects are not followed by AsyncHTTPClient but by Catena (`Redirects`), with
///   the same rules as on URLSession: 307 and 308 keep a streamed body, and credentials
///   and the environment's headers never reach another origin.
///
/// An idempotent request that fails before any response head arrived (the connection
/// was closed, or an earlier response left bytes on a reused connection that break
/// the next one) is sent again, at most three times in all, within its timeout: a
/// healthy request never fails because of another response's framing. AsyncHTTPClient
/// does not say whether the connection was reused, so a server that answers garbage to
/// a fresh connection gets the request up to three times.
public final class AsyncHTTPClientTransport: HTTPLoader {
    /// The client requests go through. One Catena made names each exchange's connection
    /// in a `catena-connection` field on its response heads, which Catena's transports
    /// over it take off; your own calls through it see the field.
    public let client: HTTPClient
    /// The timeout for requests that set none (see `RequestTimeout`).
    public let timeout: Duration
    private let ownsClient: Bool
    /// The clients for proxies and pinned hosts; nil when there are none.
    let routes: ClientRoutes?
    /// Whether the owned client's configuration has a proxy of its own, which Catena's
    /// routes do not see: HTTPS to an IP address through it is refused (see `targetURL(of:)`).
    let hasOwnProxy: Bool
    private let isShutDown = Atomic<Bool>(false)
    /// Whether the client decodes gzip and deflate, so requests may ask for them.
    let decodesCompression: Bool
    /// Whether calls may take AsyncHTTPClient's delegate API (see `sendGathered` and
    /// `sendStreamedThroughDelegate`): the client makes no spans of its own. The
    /// delegate API starts its span on the event loop, outside the caller's trace, where
    /// it would become a trace of its own; with a tracer, calls keep `execute`.
    let gathersOnEventLoop: Bool
    /// Whether the client's group, asked for `any()` on one of its loops, answers that
    /// loop: a MultiThreadedEventLoopGroup does, a group's default `any()` is `next()`.
    let anyIsCurrentLoop: Bool
    /// Where a buffered call starts while no other buffered call of this transport is in
    /// flight (nil when the group's `any()` is not its current loop): see `startingLoop()`.
    let homeLoop: (any EventLoop)?
    /// The TLS settings of an owned client's configuration, which AsyncHTTPClient does
    /// not show: WebSockets make their connections with them. Nil: the defaults.
    let tlsConfiguration: TLSConfiguration?
    /// Whether the client's configuration is known (Catena's defaults, or one it was
    /// given): WebSockets make their own connections with its settings, so a transport
    /// over a client passed in cannot open them.
    let knowsConfiguration: Bool
    /// WebSockets' TLS contexts, made on first use, by whether the route checks the address.
    let webSocketContexts = Locked<[Bool: NIOSSLContext]>([:])
    /// Whether the client's connections carry the handler that names each exchange's
    /// connection on its response: the clients Catena configured (see `ExchangeWatch`).
    let watches: Bool
    /// Buffered calls between `startingLoop()` and `callEnded()`.
    private let buffersInFlight = Atomic<Int>(0)

    /// Catena's default configuration: AsyncHTTPClient's defaults, redirects left to
    /// Catena, gzip and deflate decoded (at most ``decompressionRatioLimit`` times the
    /// compressed size), and failing fast when a connection cannot be made.
    public static var defaultConfiguration: HTTPClient.Configuration {
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            decompression: .enabled(limit: .ratio(decompressionRatioLimit)))
        configuration.connectionPool.retryConnectionEstablishment = false
        // Catena's TracingMiddleware makes each call's client span; a second one of the
        // client's would only repeat it.
        configuration.tracing.tracer = nil
        return configuration
    }

    /// How many times its compressed size a decoded body may be before the request
    /// fails. JSON compresses 5 to 20 times; gzip's own maximum is about 1,030.
    public static let decompressionRatioLimit = 200

    private static let sharedClient = ExchangeWatch.registered(
        HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: ExchangeWatch.watching(defaultConfiguration)))

    /// A transport over a process-wide client with ``defaultConfiguration``. It lives
    /// as long as the process; there is nothing to shut down.
    public convenience init(timeout: Duration = .seconds(60)) {
        self.init(client: Self.sharedClient, owns: false, decodes: true, traces: false, knowsConfiguration: true, watches: true, timeout: timeout)
    }

    /// A transport over your client. You shut the client down when you are done.
    ///
    /// Catena cannot read your client's configuration: set `decodesCompression` when it
    /// has decompression enabled, so requests ask for compressed bodies. Configure it
    /// with `redirectConfiguration: .disallow` to have Catena follow redirects.
    public convenience init(client: HTTPClient, decodesCompression: Bool = false, timeout: Duration = .seconds(60)) {
        // Its configuration cannot be read: it traces when a tracer was bootstrapped.
        self.init(
            client: client, owns: false, decodes: decodesCompression, traces: !(InstrumentationSystem.tracer is NoOpTracer),
            watches: ExchangeWatch.isWatched(client), timeout: timeout)
    }

    /// A transport that owns a new client with this configuration. Call ``shutdown()``
    /// when done; a transport dropped without it shuts its client down in the
    /// background.
    public convenience init(configuration: HTTPClient.Configuration, timeout: Duration = .seconds(60)) {
        self.init(configuration: configuration, routes: nil, timeout: timeout)
    }

    convenience init(configuration: HTTPClient.Configuration, routes: ClientRoutes?, timeout: Duration) {
        let client = ExchangeWatch.registered(
            HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: ExchangeWatch.watching(configuration)))
        let decodes = if case .enabled = configuration.decompression { true } else { false }
        let traces = configuration.tracing.tracer.map { !($0 is NoOpTracer) } ?? false
        self.init(
            client: client, owns: true, decodes: decodes, traces: traces, routes: routes, hasOwnProxy: configuration.proxy != nil,
            tls: configuration.tlsConfiguration, knowsConfiguration: true, watches: true, timeout: timeout)
    }

    /// A transport over `client`, whose configuration went through `watching(_:)`, so
    /// that its exchanges' connections are seen as with a client Catena made. For the
    /// package's tests, whose suites share one client.
    package convenience init(watchedClient client: HTTPClient, decodesCompression: Bool, timeout: Duration) {
        ExchangeWatch.registered(client)
        self.init(client: client, owns: false, decodes: decodesCompression, traces: false, watches: true, timeout: timeout)
    }

    /// `configuration` with the handler that sees each exchange's connection (see `ExchangeWatch`).
    package static func watching(_ configuration: HTTPClient.Configuration) -> HTTPClient.Configuration {
        ExchangeWatch.watching(configuration)
    }

    private init(
        client: HTTPClient, owns: Bool, decodes: Bool, traces: Bool, routes: ClientRoutes? = nil, hasOwnProxy: Bool = false,
        tls: TLSConfiguration? = nil, knowsConfiguration: Bool = false, watches: Bool = false, timeout: Duration
    ) {
        self.tlsConfiguration = tls
        self.knowsConfiguration = knowsConfiguration
        self.watches = watches
        self.client = client
        self.routes = routes
        self.hasOwnProxy = hasOwnProxy
        self.ownsClient = owns
        self.decodesCompression = decodes
        self.gathersOnEventLoop = !traces
        self.anyIsCurrentLoop = client.eventLoopGroup is MultiThreadedEventLoopGroup || client.eventLoopGroup is any EventLoop
        self.homeLoop = anyIsCurrentLoop ? Self.home(of: client) : nil
        self.timeout = timeout
    }

    /// Runs `body` with a transport that owns a client, and shuts the client down
    /// afterwards, whether `body` returns or throws.
    public static func withTransport<Result>(
        configuration: HTTPClient.Configuration = defaultConfiguration,
        timeout: Duration = .seconds(60),
        _ body: (AsyncHTTPClientTransport) async throws -> Result
    ) async throws -> Result {
        let transport = AsyncHTTPClientTransport(configuration: configuration, timeout: timeout)
        do {
            let result = try await body(transport)
            try await transport.shutdown()
            return result
        } catch {
            try? await transport.shutdown()
            throw error
        }
    }

    /// Shuts an owned client down and waits until it has closed its connections.
    /// Does nothing for a client the transport does not own, or the second time.
    public func shutdown() async throws {
        guard ownsClient, !isShutDown.exchange(true, ordering: .acquiringAndReleasing) else { return }
        // `try await client.shutdown()` resolves to the async overload, which waits;
        // spelled out because the future-returning overload would not.
        // The main client first: from here a request whose route has no client yet falls
        // back to it and is refused, never sent unpinned or direct; route clients made
        // meanwhile are in the list `shutDown()` returns. Every client is shut down, the
        // first error thrown after.
        var futures: [EventLoopFuture<Void>] = [client.shutdown()]
        futures += (routes?.shutDown() ?? []).map { $0.shutdown() }
        var failure: (any Error)?
        for future in futures {
            do { try await future.get() } catch { failure = failure ?? error }
        }
        if let failure { throw failure }
    }

    /// The client `request` goes through: the main one, or its route's (a proxy, a
    /// pinned host).
    func client(for request: APIRequest) -> HTTPClient {
        guard let routes, let route = routes.route(of: request) else { return client }
        return routes.client(for: route) ?? client
    }

    deinit {
        guard ownsClient, !isShutDown.load(ordering: .acquiring) else { return }
        // The task keeps the client alive until its shutdown has finished, so
        // AsyncHTTPClient's "not shut down before deinit" check never fires.
        let clients = [client] + (routes?.shutDown() ?? [])
        Task {
            for client in clients { try? await client.shutdown() }
        }
    }

    public func load(_ request: APIRequest) async throws(CatenaError) -> APIResponse {
        if let handoff = request[option: WebSocketUpgrade.self] {
            return try await openWebSocket(request, handoff: handoff, timeout: request.timeout ?? timeout).head
        }
        return try await Redirects.follow(request, defaultTimeout: timeout) { hop, left throws(CatenaError) in
            try await Self.resendingBeforeHead(hop, within: left) { left throws(CatenaError) in
                gathersOnEventLoop && Self.takesDelegatePath(hop) ? try await sendGathered(hop, timeout: left) : try await send(hop, timeout: left)
            }
        }
    }

    /// Streams the body as AsyncHTTPClient reads it (see `StreamedResponse`), with
    /// its backpressure: a full reader's window stops the reads from the socket. The
    /// request's timeout covers the time to the head, `StreamIdleTimeout` the
    /// silences after it.
    public func stream(_ request: APIRequest) async throws(CatenaError) -> StreamedResponse {
        // A WebSocket's upgrade is answered here, redirects not followed (as browsers do).
        if let handoff = request[option: WebSocketUpgrade.self] {
            return try await openWebSocket(request, handoff: handoff, timeout: request.timeout ?? timeout)
        }
        return try await Redirects.follow(request, defaultTimeout: timeout, head: \.head, discard: { $0.body.cancel() }) { hop, left throws(CatenaError) in
            try await Self.resendingBeforeHead(hop, within: left) { left throws(CatenaError) in
                gathersOnEventLoop && Self.streamsThroughDelegate(hop)
                    ? try await sendStreamedThroughDelegate(hop, timeout: left) : try await sendStreaming(hop, timeout: left)
            }
        }
    }

    /// The event loop a buffered call starts on, and its delegate runs on; counts the
    /// call in until `callEnded()`. The home loop while no other buffered call is in
    /// flight, so that sequential calls find their pooled connection on the loop they
    /// run on; otherwise, or for a caller already on one of the group's loops, `any()`
    /// (Architecture: "One home loop per client").
    func startingLoop() -> any EventLoop {
        let others = buffersInFlight.add(1, ordering: .relaxed).oldValue
        let any = client.eventLoopGroup.any()
        if others == 0, let homeLoop, !any.inEventLoop { return homeLoop }
        return any
    }

    /// The client's home loop: one per client, so that transports sharing a client share
    /// it, and spread over the group from client to client.
    private static func home(of client: HTTPClient) -> (any EventLoop)? {
        let loops = Array(client.eventLoopGroup.makeIterator())
        guard !loops.isEmpty else { return nil }
        // ObjectIdentifier hashes through Hasher: its address's aligned low bits are mixed.
        return loops[Int(UInt(bitPattern: ObjectIdentifier(client).hashValue) % UInt(loops.count))]
    }

    /// A call `startingLoop()` counted in has its outcome.
    func callEnded() {
        buffersInFlight.subtract(1, ordering: .relaxed)
    }

    /// Buffered calls counted in and not yet out (for tests).
    var buffersInFlightCount: Int { buffersInFlight.load(ordering: .relaxed) }

    /// How a call started on `loop` asks for its task's event loop: that loop. On one of
    /// its loops, a MultiThreadedEventLoopGroup's `any()` is that loop, so `.indifferent`
    /// gives it, as `.delegate(on:)` does at the price of a walk over the group (an array
    /// allocated per call) that other groups need: their `any()` may be `next()`, another
    /// loop each time.
    func eventLoopPreference(startedOn loop: any EventLoop) -> HTTPClient.EventLoopPreference {
        anyIsCurrentLoop ? .indifferent : .delegate(on: loop)
    }

    /// The request as AsyncHTTPClient takes it, its body opened afresh.
    func outgoing(_ request: APIRequest) async throws(CatenaError) -> HTTPClientRequest {
        var outgoing = HTTPClientRequest(url: try targetURL(of: request))
        outgoing.method = HTTPMethod(rawValue: request.method.rawValue)
        outgoing.headers = try headers(for: request)
        if let stream = request.body.stream {
            outgoing.body = try Self.streamedBody(stream, request: request)
        } else if let data = try await request.bodyData() {
            if request[option: UploadProgress.self] != nil, data.count > Self.progressChunkSize {
                // Handed over whole, the bytes would be sent without a word until the end:
                // as chunks, progress follows what AsyncHTTPClient has pulled and sent.
                let length = Int64(data.count)
                outgoing.body = try Self.streamedBody((length, { Self.chunks(of: data) }), request: request)
            } else {
                outgoing.body = .bytes(data)
            }
        }
        return outgoing
    }

    /// One exchange, no redirects followed.
    private func send(_ request: APIRequest, timeout: Duration) async throws(CatenaError) -> APIResponse {
        let outgoing = try await outgoing(request)
        let limit = request[option: MaximumResponseSize.self]
        guard !Task.isCancelled else { throw CatenaError(.cancelled, request: request) }
        let deadline = NIODeadline.now() + TimeAmount(timeout)
        let started = ContinuousClock.now
        do {
            let response: HTTPClientResponse
            do {
                response = try await client(for: request).execute(outgoing, deadline: deadline)
            } catch let error where Self.isConnectionFailure(error) {
                throw PreHeadFailure(error: error)
            }
            try checkHead(status: response.status, headers: response.headers, request: request)
            let headArrived = ContinuousClock.now
            let seen = connection(in: response.headers, started: started, request: request)
            request.report(.responseHead(status: Int(response.status.code), after: headArrived - started))
            let body = response.body
            let buffer: ByteBuffer
            if let destination = request[option: DownloadDestination.self], (200..<300).contains(response.status.code) {
                let length = response.headers.first(name: "Content-Length").flatMap { Int64($0) }
                try await withinDeadline(deadline) {
                    let writer = try DownloadWriter(destination, expectedLength: length, request: request)
                    for try await chunk in body {
                        try writer.write(Data(buffer: chunk, byteTransferStrategy: .noCopy), request: request)
                    }
                    try writer.finish(request: request)
                }
                buffer = ByteBuffer()
            } else {
                buffer = try await withinDeadline(deadline) { try await body.collect(upTo: limit) }
            }
            var complete = APIResponse(
                status: Self.status(of: response.status),
                headerFields: responseFields(of: response.headers),
                body: Data(buffer: buffer, byteTransferStrategy: .automatic),
                request: request)
            complete.timing = ResponseTiming(started: started, headArrived: headArrived, bodyEnded: .now, seen: seen)
            return complete
        } catch {
            throw Self.map(error, request: request, timeout: timeout, limit: limit)
        }
    }

    /// The connection a watched client's handler named on a response head, reported to
    /// the request's observers; nil for a client passed in, whose servers' fields of that
    /// name are theirs.
    func connection(in headers: HTTPHeaders, started: ContinuousClock.Instant, request: APIRequest) -> (connection: ConnectionInfo, requestSent: Duration?)? {
        guard watches, let value = headers.first(name: ExchangeWatch.fieldName), let seen = ExchangeWatch.seen(in: value) else { return nil }
        let connection = ExchangeWatch.connection(seen, started: started)
        request.report(.connection(connection.connection))
        return connection
    }

    /// A response head's fields as Catena hands them over: without the watch's field on a
    /// watched client (see `ExchangeWatch`).
    func responseFields(of headers: HTTPHeaders) -> HTTPFields {
        Self.fields(of: headers, dropping: watches ? ExchangeWatch.lowercaseName : nil)
    }

    /// Reads the body (into memory, or to a file) before `deadline`.
    ///
    /// AsyncHTTPClient's async deadline ends when the response head arrives, so a body
    /// that trickles in would otherwise take as long as the server likes. The reading
    /// runs in its own task, which an event-loop timer (the mechanism AsyncHTTPClient
    /// uses for its own deadline) cancels when the time is up: two more thread hops and
    /// a task per call. Only calls the delegate path cannot take come here (a streamed
    /// or watched request body, a download to a file); see `sendGathered`.
    private func withinDeadline<Value: Sendable>(_ deadline: NIODeadline, _ read: @escaping @Sendable () async throws -> Value) async throws -> Value {
        let reading = Task { try await read() }
        let expired = Atomic<Bool>(false)
        let timer = client.eventLoopGroup.any().scheduleTask(deadline: deadline) {
            expired.store(true, ordering: .releasing)
            reading.cancel()
        }
        defer { timer.cancel() }
        do {
            return try await withTaskCancellationHandler {
                try await reading.value
            } onCancel: {
                reading.cancel()
            }
        } catch  where expired.load(ordering: .acquiring) {
            throw HTTPClientError.deadlineExceeded
        }
    }
}
#endif  // AsyncHTTPClient
