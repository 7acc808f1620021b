#if AsyncHTTPClient
import AsyncHTTPClient
import Catena
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOSSL

/// Which connection each exchange went over, for the clients Catena configures.
///
/// AsyncHTTPClient does not say which connection carried a request. A handler that
/// Catena's connection initializers put in every connection's pipeline, just past the
/// response decoder (or an HTTP/2 stream's codec), adds a field to each response head it
/// passes on (`catena-connection`) saying what the connection is, whether this is its
/// first exchange, and when the request's end went out; it first removes any field of
/// that name the server sent. Catena's transports over such a client read the field and
/// take it off before handing the head over. The facts travel with the head itself: no
/// request is marked and nothing is registered per exchange, so nothing can be left
/// behind. A client Catena did not configure has no handler, and a transport over it
/// leaves a server's field of that name alone.
enum ExchangeWatch {
    /// The field's name; taken off by Catena's transports over a watched client (others
    /// using that client, `transport.client`, see it).
    static let fieldName = lowercaseName.description
    static let lowercaseName: StaticString = "catena-connection"

    /// The clients made with the handler, so that a transport made over one of them
    /// (`AsyncHTTPClientTransport(client: other.client)`) reads and drops the field too.
    /// Weak: a client lives as long as its owner keeps it.
    private static let watchedClients = Locked<[ObjectIdentifier: WeakClient]>([:])

    private struct WeakClient: Sendable {
        weak var client: HTTPClient?
    }

    /// Notes that `client` was made with ``watching(_:)``'s configuration; returns it.
    @discardableResult
    static func registered(_ client: HTTPClient) -> HTTPClient {
        watchedClients.withLock { clients in
            clients = clients.filter { $0.value.client != nil }
            clients[ObjectIdentifier(client)] = WeakClient(client: client)
        }
        return client
    }

    /// Whether `client` was made with ``watching(_:)``'s configuration and registered.
    static func isWatched(_ client: HTTPClient) -> Bool {
        watchedClients.withLock { $0[ObjectIdentifier(client)]?.client === client }
    }

    /// What the field's instants count from: one process's handlers and transports share it.
    static let epoch = ContinuousClock.now

    /// What the handler saw of one exchange.
    struct Seen: Sendable, Equatable {
        /// Whether this exchange was the connection's first.
        var isFirst: Bool
        var readyAt: ContinuousClock.Instant
        var requestSent: ContinuousClock.Instant?
        var httpVersion: String
        var tlsVersion: String?
        var remoteAddress: String?
        var remotePort: Int?
        var localPort: Int?
    }

    /// The field's value: `first sent ready version tls address port local`, instants as
    /// nanoseconds from ``epoch``, "-" for what is unknown.
    static func value(of seen: Seen) -> String {
        value(first: seen.isFirst, sent: seen.requestSent, connection: connectionPart(of: seen))
    }

    /// Built in one string: the handler makes this for every response.
    static func value(first: Bool, sent: ContinuousClock.Instant?, connection: String) -> String {
        var value = first ? "1 " : "0 "
        value.reserveCapacity(24 + connection.utf8.count)
        value += sent.map(nanoseconds) ?? "-"
        value += " "
        value += connection
        return value
    }

    /// The part of ``value(of:)`` that is the connection's own, made once per connection.
    static func connectionPart(of seen: Seen) -> String {
        [
            nanoseconds(seen.readyAt), seen.httpVersion, seen.tlsVersion ?? "-", seen.remoteAddress ?? "-", seen.remotePort.map(String.init) ?? "-",
            seen.localPort.map(String.init) ?? "-",
        ].joined(separator: " ")
    }

    private static let httpVersions = ["1.1", "2"]
    private static let tlsVersions = ["TLSv1.0", "TLSv1.1", "TLSv1.2", "TLSv1.3"]

    /// The field's value read back; nil for anything ``value(of:)`` does not make (the
    /// handler writes it, but nothing read off a head is taken on trust). Read in place,
    /// allocating nothing: the transport reads one for every response.
    static func seen(in value: String) -> Seen? {
        var value = value
        return value.withUTF8 { bytes -> Seen? in
            var words = Words(rest: bytes[...])
            guard let first = words.next(), let sent = words.next(), let ready = words.next(), let version = words.next(), let tls = words.next(),
                let address = words.next(), let remotePort = words.next(), let localPort = words.next(), words.next() == nil,
                first.count == 1, first.first == UInt8(ascii: "1") || first.first == UInt8(ascii: "0"),
                let readyAt = number(ready).map(instant), let httpVersion = httpVersions.first(where: { $0.utf8.elementsEqual(version) }),
                let requestSent = optional(sent, { number($0).map(instant) }),
                let tlsVersion = optional(tls, { tls in tlsVersions.first { $0.utf8.elementsEqual(tls) } }),
                let remote = optional(remotePort, port), let local = optional(localPort, port), !address.isEmpty
            else { return nil }
            return Seen(
                isFirst: first.first == UInt8(ascii: "1"), readyAt: readyAt, requestSent: requestSent, httpVersion: httpVersion,
                tlsVersion: tlsVersion, remoteAddress: isDash(address) ? nil : String(decoding: address, as: UTF8.self), remotePort: remote,
                localPort: local)
        }
    }

    private typealias Bytes = Slice<UnsafeBufferPointer<UInt8>>

    /// The words of a value, split at each space; an empty word where two meet.
    private struct Words {
        var rest: Bytes?

        mutating func next() -> Bytes? {
            guard let current = rest else { return nil }
            guard let space = current.firstIndex(of: UInt8(ascii: " ")) else {
                rest = nil
                return current
            }
            rest = current[(space + 1)...]
            return current[..<space]
        }
    }

    private static func isDash(_ word: Bytes) -> Bool {
        word.count == 1 && word.first == UInt8(ascii: "-")
    }

    /// `.some(nil)` for "-", `.some(value)` for what `read` reads, nil for anything else.
    private static func optional<T>(_ word: Bytes, _ read: (Bytes) -> T?) -> T?? {
        isDash(word) ? .some(nil) : read(word).map { .some($0) }
    }

    /// A whole number as `String(_:)` writes one: an optional minus, no leading zeros,
    /// no "-0", within Int64.
    private static func number(_ word: Bytes) -> Int64? {
        let negative = word.first == UInt8(ascii: "-")
        let digits = negative ? word.dropFirst() : word
        guard let lead = digits.first, lead != UInt8(ascii: "0") || (digits.count == 1 && !negative) else { return nil }
        var magnitude: UInt64 = 0
        for byte in digits {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            let (times, overflowed) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, carried) = times.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
            guard !overflowed, !carried, sum <= UInt64(Int64.max) else { return nil }
            magnitude = sum
        }
        return negative ? -Int64(magnitude) : Int64(magnitude)
    }

    private static func port(_ word: Bytes) -> Int? {
        guard word.first != UInt8(ascii: "-"), let port = number(word), port <= 65535 else { return nil }
        return Int(port)
    }

    private static func nanoseconds(_ instant: ContinuousClock.Instant) -> String {
        let (seconds, attoseconds) = (instant - epoch).components
        return String(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }

    private static func instant(_ nanoseconds: Int64) -> ContinuousClock.Instant {
        epoch + .nanoseconds(nanoseconds)
    }

    /// The connection `seen` describes, for an exchange handed to the client at
    /// `started`, and when its request was sent, measured from `started`.
    static func connection(_ seen: Seen, started: ContinuousClock.Instant) -> (connection: ConnectionInfo, requestSent: Duration?) {
        // New to this exchange: its connection's first, or an HTTP/2 stream that began
        // before the connection was ready (it waited for the handshake with the first). An
        // HTTP/1.1 connection made while this exchange waited, but first used by another,
        // is reused: the wait was the pool's.
        let waited = seen.readyAt >= started
        let isNew = seen.isFirst || (seen.httpVersion == "2" && waited)
        let connection = ConnectionInfo(
            isReused: !isNew, readyAfter: isNew && waited ? seen.readyAt - started : nil, remoteAddress: seen.remoteAddress,
            remotePort: seen.remotePort, localPort: seen.localPort, httpVersion: seen.httpVersion, tlsVersion: seen.tlsVersion)
        // A request whose end went out after the head (an early answer) has no send time.
        return (connection, seen.requestSent.map { $0 - started })
    }

    /// `configuration` with the handler added to every connection, after its own initializers.
    static func watching(_ configuration: HTTPClient.Configuration) -> HTTPClient.Configuration {
        var configuration = configuration
        configuration.http1_1ConnectionDebugInitializer = after(configuration.http1_1ConnectionDebugInitializer) { channel in
            let sync = channel.pipeline.syncOperations
            let facts = ConnectionFacts(channel, httpVersion: "1.1", sync: sync)
            try sync.addHandler(
                ExchangeWatchHandler(facts), position: .after(try sync.handler(type: ByteToMessageHandler<HTTPResponseDecoder>.self)))
        }
        configuration.http2ConnectionDebugInitializer = after(configuration.http2ConnectionDebugInitializer) { channel in
            let sync = channel.pipeline.syncOperations
            try sync.addHandler(ConnectionFacts(channel, httpVersion: "2", sync: sync))
        }
        configuration.http2StreamChannelDebugInitializer = after(configuration.http2StreamChannelDebugInitializer) { channel in
            // Streams run on their connection's loop, where its facts live. Without them
            // (a caller's initializer removed them) the handler still removes a server's field.
            let facts = try? channel.parent?.pipeline.syncOperations.handler(type: ConnectionFacts.self)
            let sync = channel.pipeline.syncOperations
            try sync.addHandler(
                ExchangeWatchHandler(facts), position: .after(try sync.handler(type: HTTP2FramePayloadToHTTP1ClientCodec.self)))
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
    /// The connection as its first exchange sees it.
    let seen: ExchangeWatch.Seen
    /// The connection's part of the field, made once.
    let connectionPart: String
    var heads = 0

    init(_ channel: any Channel, httpVersion: String, sync: ChannelPipeline.SynchronousOperations?) {
        let remote = channel.parent?.remoteAddress ?? channel.remoteAddress
        let tls = try? (sync ?? channel.parent?.pipeline.syncOperations)?.handler(type: NIOSSLHandler.self).tlsVersion
        seen = ExchangeWatch.Seen(
            isFirst: true, readyAt: .now, httpVersion: httpVersion, tlsVersion: tls.flatMap { $0 }.map(Self.name),
            remoteAddress: remote?.ipAddress, remotePort: remote?.port, localPort: (channel.parent ?? channel).localAddress?.port)
        connectionPart = ExchangeWatch.connectionPart(of: seen)
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

/// Notes whether each request is its connection's first and when its end went out, and
/// adds what the exchange went over to the response's head (see ``ExchangeWatch``),
/// after removing any field of that name the server sent. On its channel's event loop only.
final class ExchangeWatchHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias InboundOut = HTTPClientResponsePart
    typealias OutboundIn = HTTPClientRequestPart
    typealias OutboundOut = HTTPClientRequestPart

    /// Nil when the connection's facts could not be found: a server's field is still removed.
    private let facts: ConnectionFacts?
    private var isFirst = false
    private var requestSent: ContinuousClock.Instant?

    init(_ facts: ConnectionFacts?) {
        self.facts = facts
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head:
            isFirst = facts?.heads == 0
            facts?.heads += 1
            requestSent = nil
        case .end:
            requestSent = .now
        case .body:
            break
        }
        context.write(data, promise: promise)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(var head) = unwrapInboundIn(data) else { return context.fireChannelRead(data) }
        if head.headers.contains(name: ExchangeWatch.fieldName) { head.headers.remove(name: ExchangeWatch.fieldName) }
        if let facts {
            head.headers.add(name: ExchangeWatch.fieldName, value: ExchangeWatch.value(first: isFirst, sent: requestSent, connection: facts.connectionPart))
        }
        context.fireChannelRead(wrapInboundOut(.head(head)))
    }
}
#endif  // AsyncHTTPClient
