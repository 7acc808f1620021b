/// How a WebSocket is opened and kept: subprotocols, limits, keepalive and the close
/// handshake's patience.
///
/// ```swift
/// var options = WebSocketOptions()
/// options.subprotocols = ["graphql-transport-ws"]
/// options.maximumMessageSize = 256 * 1024
/// let socket = try await chain.webSocket(request, options: options)
/// ```
public struct WebSocketOptions: Sendable {
    /// The subprotocols offered in `Sec-WebSocket-Protocol`, most wanted first. The
    /// server must choose one of them, or none; any other answer fails the upgrade.
    public var subprotocols: [String] = []
    /// The largest message (all its fragments) and the largest frame the socket takes:
    /// a bigger one closes it with 1009. 4 MiB by default.
    public var maximumMessageSize: Int = 4 * 1024 * 1024
    /// How many bytes of messages nobody has read yet the socket holds before it stops
    /// reading from the connection, so that the server's sending slows down with the
    /// reader (one message more may be held). 1 MiB by default.
    public var bufferedBytes: Int = 1024 * 1024
    /// How long ``WebSocket/close(_:reason:)`` waits for the server's close frame before
    /// it closes the connection anyway. 5 seconds by default.
    public var closeTimeout: Duration = .seconds(5)
    /// How often a ping checks that the server is still there; nil sends none. 20
    /// seconds by default.
    public var pingInterval: Duration? = .seconds(20)
    /// How long a ping's pong (or any frame) may take before the connection counts as
    /// dead and the socket fails with ``CatenaError/Code/timedOut``. 20 seconds by default.
    public var pongTimeout: Duration = .seconds(20)

    /// permessage-deflate (RFC 7692) offered to the server; nil, the default, offers no
    /// compression. See ``WebSocketCompression`` for when to turn it on. A compressed
    /// message is held to ``maximumMessageSize`` as it inflates.
    public var compression: WebSocketCompression?

    /// The defaults.
    public init() {}
}
