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
        var isReused: Bool
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
        // A connection that was ready before the exchange began did not make it wait.
        let waited = !seen.isReused && seen.readyAt >= started
        let connection = ConnectionInfo(
            isReused: seen.isReused, readyAfter: waited ? seen.readyAt - started : nil, remoteAddress: seen.remoteAddress,
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
    static func watching(_ configuration: HTTPClient.Configuration) -> HTTPClient.Configuration {
        var configuration = configuration
        let first1 = configuration.http1_1ConnectionDebugInitializer
        configuration.http1_1ConnectionDebugInitializer = { channel in
            let watched = channel.eventLoop.submit {
                let sync = channel.pipeline.syncOperations
                let facts = ConnectionFacts(channel, httpVersion: "1.1", sync: sync)
                try sync.addHandler(ExchangeWatchHandler(facts), position: .after(try sync.handler(type: HTTPRequestEncoder.self)))
            }
            return first1.map { first in first(channel).flatMap { watched } } ?? watched
        }
        let first2 = configuration.http2ConnectionDebugInitializer
        configuration.http2ConnectionDebugInitializer = { channel in
            let watched = channel.eventLoop.submit {
                let sync = channel.pipeline.syncOperations
                try sync.addHandler(ConnectionFacts(channel, httpVersion: "2", sync: sync))
            }
            return first2.map { first in first(channel).flatMap { watched } } ?? watched
        }
        let stream = configuration.http2StreamChannelDebugInitializer
        configuration.http2StreamChannelDebugInitializer = { channel in
            let watched = channel.eventLoop.submit {
                // Streams run on their connection's loop, where its facts live.
                let parent = try channel.parent.map { try $0.pipeline.syncOperations.handler(type: ConnectionFacts.self) }
                let facts = parent ?? ConnectionFacts(channel, httpVersion: "2", sync: nil)
                let sync = channel.pipeline.syncOperations
                try sync.addHandler(ExchangeWatchHandler(facts), position: .after(try sync.handler(type: HTTP2FramePayloadToHTTP1ClientCodec.self)))
            }
            return stream.map { first in first(channel).flatMap { watched } } ?? watched
        }
        return configuration
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

    private let facts: ConnectionFacts
    private var mark: UInt64?
    private var seen: ExchangeWatch.Seen?
    private var published = false

    init(_ facts: ConnectionFacts) {
        self.facts = facts
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(var head):
            let values = head.headers[ExchangeWatch.fieldName]
            if !values.isEmpty { head.headers.remove(name: ExchangeWatch.fieldName) }
            mark = values.last.flatMap { UInt64($0) }
            published = false
            seen = ExchangeWatch.Seen(
                isReused: facts.heads > 0, readyAt: facts.readyAt, remoteAddress: facts.remoteAddress, remotePort: facts.remotePort,
                localPort: facts.localPort, httpVersion: facts.httpVersion, tlsVersion: facts.tlsVersion)
            facts.heads += 1
            context.write(wrapOutboundOut(.head(head)), promise: promise)
        case .end:
            seen?.requestSent = .now
            if published, let mark, let seen { ExchangeWatch.shared.publish(mark, seen) }
            context.write(data, promise: promise)
        case .body:
            context.write(data, promise: promise)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if !published, let mark, let seen {
            published = true
            ExchangeWatch.shared.publish(mark, seen)
        }
        context.fireChannelRead(data)
    }
}
#endif  // AsyncHTTPClient
