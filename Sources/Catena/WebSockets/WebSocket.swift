public import Foundation

/// An open WebSocket (RFC 6455), from ``HTTPLoader/webSocket(_:options:)``.
///
/// Read its ``messages`` with `for try await`; ``send(_:)`` from any task; end it with
/// ``close(_:reason:)``. Pings are answered, and (see ``WebSocketOptions``) sent to
/// find a dead connection. A slow reader slows the connection: the socket holds
/// ``WebSocketOptions/bufferedBytes`` of unread messages, then stops reading.
///
/// ```swift
/// let socket = try await chain.webSocket(try APIRequest(urlString: "wss://chat.example.com/room"))
/// try await socket.send(text: "hello")
/// for try await message in socket.messages {
///     if case .text(let text) = message { print(text) }
/// }
/// ```
///
/// The loop ends after an orderly close (1000, 1001, or a close frame with no code) and
/// throws otherwise: ``CatenaError/Code/connectionLost`` for a server's abnormal close
/// (its ``WebSocketClose`` is the error's `underlyingError`) or a connection that
/// ended without one, ``CatenaError/Code/invalidResponse`` for a frame that broke the
/// protocol (Catena closed the socket with the code that says why),
/// ``CatenaError/Code/timedOut`` when a ping went unanswered, and
/// ``CatenaError/Code/cancelled`` when the reading task was cancelled, which also
/// closes the socket. The socket closes (1001, going away) when it and every loop
/// over its messages are dropped.
public final class WebSocket: Sendable {
    /// The server's 101 answer: its header fields and the request as it was sent.
    public let response: APIResponse
    /// The subprotocol the server chose from ``WebSocketOptions/subprotocols``; nil when
    /// it chose none.
    public let subprotocol: String?
    /// The messages as they arrive, read by one loop at a time.
    public let messages: Messages
    let owner: Owner

    package init(
        frames: any WebSocketFrameTransport, response: APIResponse, subprotocol: String?, options: WebSocketOptions,
        codec: (any WebSocketMessageCodec)? = nil, upgradeBody: ResponseBody? = nil, handoff: WebSocketUpgrade.Handoff? = nil
    ) {
        self.response = response
        self.subprotocol = subprotocol
        let session = WebSocketSession(
            frames: frames, request: response.request, options: options, codec: codec, upgradeBody: upgradeBody, handoff: handoff)
        owner = Owner(session)
        messages = Messages(owner: owner)
        session.start()
    }

    /// Sends a message. Returns once the connection has taken it; while the server
    /// reads more slowly than messages are sent, each send waits until its message is
    /// written, so a slow server slows the sender and little memory is held.
    ///
    /// - Throws: ``CatenaError/Code/connectionLost`` once the socket is closing or
    ///   closed, or when the connection failed.
    public func send(_ message: WebSocketMessage) async throws(CatenaError) {
        try await owner.session.send(message)
    }

    /// Sends a text message.
    public func send(text: String) async throws(CatenaError) {
        try await send(.text(text))
    }

    /// Sends a binary message.
    public func send(data: Data) async throws(CatenaError) {
        try await send(.binary(data))
    }

    /// Closes the socket: sends a close frame with `code` and `reason` (cut to 123
    /// bytes), then waits for the server's close frame, at most
    /// ``WebSocketOptions/closeTimeout``, before it closes the connection. Messages that
    /// arrive meanwhile are dropped; the loop over ``messages`` ends. Closing a closed
    /// socket does nothing.
    public func close(_ code: WebSocketCloseCode = .normalClosure, reason: String = "") async {
        await owner.session.close(code, reason: reason)
    }

    /// How the socket ended: the server's close frame, or the close Catena sent when the
    /// server broke the protocol; nil while it is open.
    public var closeStatus: WebSocketClose? {
        owner.session.closeStatus
    }

    /// The messages of a ``WebSocket`` as an `AsyncSequence`.
    public struct Messages: AsyncSequence, Sendable {
        public typealias Element = WebSocketMessage
        public typealias Failure = CatenaError

        let owner: Owner

        public func makeAsyncIterator() -> AsyncIterator {
            AsyncIterator(owner: owner)
        }

        /// Reads the next message.
        public struct AsyncIterator: AsyncIteratorProtocol, Sendable {
            let owner: Owner

            public mutating func next() async throws(CatenaError) -> WebSocketMessage? {
                try await owner.session.nextMessage()
            }

            public mutating func next(isolation actor: isolated (any Actor)?) async throws(CatenaError) -> WebSocketMessage? {
                try await owner.session.nextMessage()
            }
        }
    }

    /// Held by the socket and every iterator of its messages: the last one gone closes it.
    final class Owner: Sendable {
        let session: WebSocketSession
        init(_ session: WebSocketSession) { self.session = session }
        deinit { session.abandon() }
    }
}
