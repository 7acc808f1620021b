#if AsyncHTTPClient
import AsyncHTTPClient
import Catena
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOSSL
import Synchronization

/// Which connection each exchange went over, for the clients Catena configures.
///
/// AsyncHTTPClient does not say which connection carried a request. The transport marks
/// each request with a field (`catena-exchange: N`); a handler that Catena's connection
/// initializers put in every connection's pipeline, just past the request encoder (or an
/// HTTP/2 stream's codec), takes the field off before any byte is written, notes what
/// the connection is, when the head and the request's end went out, and publishes that
/// here before the response's first byte reaches the decoder: so before the transport
/// sees the head. A client passed in (`init(client:)`) has no handler; its requests carry
/// no mark.
final class ExchangeWatch: Sendable {
    /// One for the process: the shared client's transports share its connections.
    static let shared = ExchangeWatch()
    /// The mark's field name; never sent (the handler removes every field of this name).
    static let fieldName = "catena-exchange"

    /// What the handler saw of one exchange.
    struct Seen: Sendable {
        /// Whether this exchange was the connection's first.
        var isFirst: Bool
        var readyAt: ContinuousClock.Instant
        var remoteAddress: String?
        var remotePort: Int?
        var localPort: Int?
        var httpVersion: String
        var tlsVersion: String?
        var requestSent: ContinuousClock.Instant?
    }

    private let next = Atomic<UInt64>(0)
    /// The exchanges begun and not yet ended: nil until the handler published.
    private let exchanges = Locked<[UInt64: Seen?]>([:])

    /// A new mark, registered until ``end(_:started:)`` or ``drop(_:)``.
    func begin() -> UInt64 {
        let mark = next.add(1, ordering: .relaxed).newValue
        exchanges.withLock { $0[mark] = .some(nil) }
        return mark
    }

    /// Records what the handler saw; ignored once the exchange ended, so nothing outlives it.
    func publish(_ mark: UInt64, _ seen: Seen) {
        exchanges.withLock { exchanges in
            if exchanges[mark] != nil { exchanges[mark] = seen }
        }
    }

    /// Ends the exchange: its connection, and when its request was sent, measured from `started`.
    func end(_ mark: UInt64, started: ContinuousClock.Instant) -> (connection: ConnectionInfo, requestSent: Duration?)? {
        guard let seen = exchanges.withLock({ $0.removeValue(forKey: mark) }) ?? nil else { return nil }
        // New to this exchange: its connection's first, or an HTTP/2 stream that began
        // before the connection was ready (it waited for the handshake with the first). An
        // HTTP/1.1 connection made while this exchange waited, but first used by another,
        // is reused: the wait was the pool's.
        let waited = seen.readyAt >= started
        let isNew = seen.isFirst || (seen.httpVersion == "2" && waited)
        let connection = ConnectionInfo(
            isReused: !isNew, readyAfter: isNew && waited ? seen.readyAt - started : nil, remoteAddress: seen.remoteAddress,
            remotePort: seen.remotePort, localPort: seen.localPort, httpVersion: seen.httpVersion, tlsVersion: seen.tlsVersion)
        return (connection, seen.requestSent.map { $0 - started })
    }

    /// Forgets an exchange that ended without a head.
    func drop(_ mark: UInt64) {
        exchanges.withLock { _ = $0.removeValue(forKey: mark) }
    }

    /// The number of exchanges begun and not ended (for tests: nothing may stay).
    var pending: Int { exchanges.withLock { $0.count } }

    /// `configuration` with the handler added to every connection, after its own initializers.
    static func watching(_ configuration: HTTPClient.Configuration, into watch: ExchangeWatch = .shared) -> HTTPClient.Configuration {
        var configuration = configuration
        configuration.http1_1ConnectionDebugInitializer = after(configuration.http1_1ConnectionDebugInitializer) { channel in
            let sync = channel.pipeline.syncOperations
            let facts = ConnectionFacts(channel, httpVersion: "1.1", sync: sync)
            try sync.addHandler(ExchangeWatchHandler(facts, watch), position: .after(try sync.handler(type: HTTPRequestEncoder.self)))
        }
        configuration.http2ConnectionDebugInitializer = after(configuration.http2ConnectionDebugInitializer) { channel in
            let sync = channel.pipeline.syncOperations
            try sync.addHandler(ConnectionFacts(channel, httpVersion: "2", sync: sync))
        }
        configuration.http2StreamChannelDebugInitializer = after(configuration.http2StreamChannelDebugInitializer) { channel in
            // Streams run on their connection's loop, where its facts live. Without them
            // (a caller's initializer removed them) the handler still takes the mark off.
            let facts = try? channel.parent?.pipeline.syncOperations.handler(type: ConnectionFacts.self)
            let sync = channel.pipeline.syncOperations
            try sync.addHandler(
                ExchangeWatchHandler(facts, watch), position: .after(try sync.handler(type: HTTP2FramePayloadToHTTP1ClientCodec.self)))
        }
        return configuration
    }

    /// An initializer that runs `first` (the caller's), then `add` on the channel's loop:
    /// at once when already there (AsyncHTTPClient calls from it), so no request waits a
    /// loop turn, and no closed channel's pipeline is read a turn later.
    private static func after(
        _ first: (@Sendable (any Channel) -> EventLoopFuture<Void>)?, _ add: @escaping @Sendable (any Channel) throws -> Void
    ) -> @Sendable (any Channel) -> EventLoopFuture<Void> {
        let run: @Sendable (any Channel) -> EventLoopFuture<Void> = { channel in
            channel.eventLoop.inEventLoop ? channel.eventLoop.makeCompletedFuture { try add(channel) } : channel.eventLoop.submit { try add(channel) }
        }
        guard let first else { return run }
        return { channel in first(channel).flatMap { run(channel) } }
    }
}

/// What a connection is, noted once when AsyncHTTPClient made it ready, and how many
/// requests it has carried. Lives in an HTTP/2 connection's pipeline (last, passing on
/// whatever reaches it) for its streams' handlers to find; touched on its event loop only.
final class ConnectionFacts: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny
    let readyAt = ContinuousClock.now
    let remoteAddress: String?
    let remotePort: Int?
    let localPort: Int?
    let httpVersion: String
    let tlsVersion: String?
    var heads = 0

    init(_ channel: any Channel, httpVersion: String, sync: ChannelPipeline.SynchronousOperations?) {
        let remote = channel.parent?.remoteAddress ?? channel.remoteAddress
        remoteAddress = remote?.ipAddress
        remotePort = remote?.port
        localPort = (channel.parent ?? channel).localAddress?.port
        self.httpVersion = httpVersion
        let tls = try? (sync ?? channel.parent?.pipeline.syncOperations)?.handler(type: NIOSSLHandler.self).tlsVersion
        tlsVersion = tls.flatMap { $0 }.map(Self.name)
    }

    private static func name(_ version: TLSVersion) -> String {
        switch version {
        case .tlsv1: "TLSv1.0"
        case .tlsv11: "TLSv1.1"
        case .tlsv12: "TLSv1.2"
        case .tlsv13: "TLSv1.3"
        }
    }
}

/// Takes the mark off each request head, and publishes what its exchange went over once
/// the response's first bytes arrive (again if the request's end goes out after them).
/// On its channel's event loop only.
final class ExchangeWatchHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny
    typealias InboundOut = NIOAny
    typealias OutboundIn = HTTPClientRequestPart
    typealias OutboundOut = HTTPClientRequestPart

    /// Nil when the connection's facts could not be found: the mark is still taken off.
    private let facts: ConnectionFacts?
    private let watch: ExchangeWatch
    private var mark: UInt64?
    private var seen: ExchangeWatch.Seen?
    private var published = false

    init(_ facts: ConnectionFacts?, _ watch: ExchangeWatch) {
        self.facts = facts
        self.watch = watch
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(var head):
            // The transport sends one field of the name (it drops a caller's); all go.
            let value = head.headers.first(name: ExchangeWatch.fieldName)
            if value != nil { head.headers.remove(name: ExchangeWatch.fieldName) }
            mark = value.flatMap { UInt64($0) }
            published = false
            seen = facts.map { facts in
                ExchangeWatch.Seen(
                    isFirst: facts.heads == 0, readyAt: facts.readyAt, remoteAddress: facts.remoteAddress, remotePort: facts.remotePort,
                    localPort: facts.localPort, httpVersion: facts.httpVersion, tlsVersion: facts.tlsVersion)
            }
            facts?.heads += 1
            context.write(wrapOutboundOut(.head(head)), promise: promise)
        case .end:
            seen?.requestSent = .now
            if published, let mark, let seen { watch.publish(mark, seen) }
            context.write(data, promise: promise)
        case .body:
            context.write(data, promise: promise)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if !published, let mark, let seen {
            published = true
            watch.publish(mark, seen)
        }
        context.fireChannelRead(data)
    }
}
#endif  // AsyncHTTPClient
