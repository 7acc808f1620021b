import Foundation

/// A WebSocket that connects again after the connection drops, as ``EventSource`` does
/// for server-sent events: after a failure or a close other than 1000, it waits (see
/// ``ReconnectPolicy``: doubling, with a quarter of jitter) and opens a new socket
/// through the same chain, then runs `onConnect` (to sign in or subscribe again) before
/// the messages go on.
///
/// ```swift
/// let feed = ReconnectingWebSocket(try .get("ws", "prices"), loader: chain) { socket in
///     try await socket.send(text: #"{"subscribe":"CTN"}"#)
/// }
/// for try await message in feed.messages { … }
/// ```
///
/// The loop over ``messages`` connects, and ends when the server closes with 1000 or
/// ``close(_:reason:)`` is called. It throws when the upgrade is refused (but 429,
/// 502, 503 and 504, which are waited out when the policy says so), when `onConnect`
/// throws, when a frame broke the protocol, or after `maximumAttempts` reconnections
/// without a message. Cancelling the loop's task closes the socket.
public final class ReconnectingWebSocket: Sendable {
    /// What the socket is doing, for ``init(_:loader:options:policy:onConnect:onStateChange:)``'s `onStateChange`.
    public enum State: Sendable {
        /// Opening connection number `attempt` (1 for the first).
        case connecting(attempt: Int)
        /// Open, `onConnect` done.
        case connected(WebSocket)
        /// Waiting before the next connection, after `reason` (nil: the server closed
        /// with a code that asks for a reconnection).
        case waiting(Reconnection)
        /// Ended: by the server's 1000, by `close`, or by an error.
        case ended(CatenaError?)
    }

    private struct Shared {
        var current: WebSocket?
        var closed = false
    }

    /// The request each connection sends.
    public let request: APIRequest
    let loader: any HTTPLoader
    let options: WebSocketOptions
    /// When to reconnect.
    public let policy: ReconnectPolicy
    let onConnect: (@Sendable (WebSocket) async throws -> Void)?
    let onStateChange: (@Sendable (State) -> Void)?
    private let shared = Locked(Shared())

    /// A socket for `request` through `loader`; nothing connects before a loop reads ``messages``.
    ///
    /// - Parameters:
    ///   - request: The upgrade each connection sends.
    ///   - loader: The chain every connection goes through.
    ///   - options: Each socket's options.
    ///   - policy: When to reconnect; the first wait is `initialDelay` (1 s by default here).
    ///   - onConnect: Runs on each new socket before its messages are read: sign in,
    ///     subscribe again. A throw ends the loop with the error.
    ///   - onStateChange: Runs at each change of ``State``.
    public init(
        _ request: APIRequest, loader: any HTTPLoader, options: WebSocketOptions = WebSocketOptions(),
        policy: ReconnectPolicy = ReconnectPolicy(initialDelay: .seconds(1), maximumDelay: .seconds(30)),
        onConnect: (@Sendable (WebSocket) async throws -> Void)? = nil, onStateChange: (@Sendable (State) -> Void)? = nil
    ) {
        self.request = request
        self.loader = loader
        self.options = options
        self.policy = policy
        self.onConnect = onConnect
        self.onStateChange = onStateChange
    }

    /// The socket open now; nil while connecting or waiting.
    public var current: WebSocket? {
        shared.withLock { $0.current }
    }

    /// Sends on the socket open now.
    ///
    /// - Throws: ``CatenaError/Code/connectionLost`` while no socket is open (the
    ///   message is not kept for the next one: `onConnect` is where a conversation
    ///   starts again).
    public func send(_ message: WebSocketMessage) async throws(CatenaError) {
        guard let socket = current else {
            throw CatenaError(.connectionLost, request: request, detail: "the WebSocket is reconnecting: nothing was sent")
        }
        try await socket.send(message)
    }

    /// Closes the socket open now and ends the loop; no reconnection follows.
    public func close(_ code: WebSocketCloseCode = .normalClosure, reason: String = "") async {
        let socket = shared.withLock { shared in
            shared.closed = true
            return shared.current
        }
        await socket?.close(code, reason: reason)
    }

    /// The messages of every connection in turn, for one loop at a time: reading them
    /// connects, and a slow loop slows each socket as ``WebSocket/messages`` does.
    public var messages: Messages {
        Messages(owner: self)
    }

    /// The messages of a ``ReconnectingWebSocket`` as an `AsyncSequence`.
    public struct Messages: AsyncSequence, Sendable {
        public typealias Element = WebSocketMessage
        public typealias Failure = CatenaError

        let owner: ReconnectingWebSocket

        public func makeAsyncIterator() -> AsyncIterator {
            AsyncIterator(owner: owner)
        }

        /// Connects, reads and reconnects as the loop asks for messages.
        public struct AsyncIterator: AsyncIteratorProtocol {
            let owner: ReconnectingWebSocket
            private var socket: WebSocket?
            private var inner: WebSocket.Messages.AsyncIterator?
            private var attempts = 0
            private var connections = 0
            private var finished = false

            init(owner: ReconnectingWebSocket) {
                self.owner = owner
            }

            public mutating func next() async throws(CatenaError) -> WebSocketMessage? {
                while !finished {
                    if inner == nil {
                        if let delay = pendingDelay {
                            pendingDelay = nil
                            do {
                                try await Task.sleep(for: delay)
                            } catch {
                                let cancelled = CatenaError(.cancelled, request: owner.request, detail: "cancelled while waiting to reconnect")
                                end(cancelled)
                                throw cancelled
                            }
                            if owner.isClosed {
                                end(nil)
                                return nil
                            }
                        }
                        do {
                            try await connect()
                        } catch {
                            try reconnect(after: error)
                            continue
                        }
                        continue
                    }
                    do throws(CatenaError) {
                        if let message = try await inner?.next() {
                            attempts = 0
                            return message
                        }
                        let status = socket?.closeStatus
                        dropSocket()
                        // 1000 ends the conversation; 1001 (a server going away) and the rest reconnect.
                        if owner.isClosed || status?.code == .normalClosure {
                            end(nil)
                            return nil
                        }
                        try reconnect(after: nil)
                    } catch {
                        if Task.isCancelled { await socket?.close(.goingAway) }
                        dropSocket()
                        try reconnect(after: error)
                    }
                }
                return nil
            }

            private mutating func connect() async throws(CatenaError) {
                connections += 1
                owner.onStateChange?(.connecting(attempt: connections))
                let socket = try await owner.loader.webSocket(owner.request, options: owner.options)
                guard owner.adopt(socket) else {
                    await socket.close()
                    end(nil)
                    return
                }
                do {
                    try await owner.onConnect?(socket)
                } catch {
                    await socket.close(.goingAway)
                    owner.release()
                    let failure = CatenaError.wrapping(error, request: owner.request, detail: "onConnect failed: \(error)")
                    end(failure)
                    throw failure
                }
                owner.onStateChange?(.connected(socket))
                self.socket = socket
                inner = socket.messages.makeAsyncIterator()
            }

            private mutating func dropSocket() {
                socket = nil
                inner = nil
                owner.release()
            }

            /// Waits before the next connection after `error` (nil: a close that asks
            /// for one), or ends and throws when it is not one to reconnect after.
            private mutating func reconnect(after error: CatenaError?) throws(CatenaError) {
                guard !finished else { throw error ?? CatenaError(.cancelled, request: owner.request) }
                if let error, !ReconnectingWebSocket.reconnects(after: error, policy: owner.policy) {
                    end(error)
                    throw error
                }
                attempts += 1
                if let maximum = owner.policy.maximumAttempts, attempts > maximum {
                    let failure =
                        error
                        ?? CatenaError(.connectionLost, request: owner.request, detail: "the WebSocket closed \(maximum) times in a row without a message")
                    end(failure)
                    throw failure
                }
                let retryAfter = error?.response?.headerFields[.retryAfter].flatMap { RetryMiddleware.parseRetryAfter($0, now: Date()) }
                let delay = owner.policy.delay(attempt: attempts, serverRetry: nil, retryAfter: retryAfter)
                pendingDelay = Swift.min(delay + delay * Double.random(in: 0...0.25), Swift.max(delay, owner.policy.maximumDelay))
                owner.onStateChange?(.waiting(Reconnection(attempt: attempts, delay: pendingDelay ?? delay, lastEventID: "", reason: error)))
            }

            private var pendingDelay: Duration?

            private mutating func end(_ error: CatenaError?) {
                guard !finished else { return }
                finished = true
                owner.onStateChange?(.ended(error))
            }
        }
    }

    /// Whether a failure is one to connect again after: a lost or failed connection, a
    /// timeout, an upgrade refused for a while (429, 502, 503, 504), and a server's
    /// close with a code that does not blame the client.
    static func reconnects(after error: CatenaError, policy: ReconnectPolicy) -> Bool {
        if Task.isCancelled || error.code == .cancelled { return false }
        switch error.code {
        case .connectionLost:
            let blamesClient: Set<UInt16> = [1002, 1003, 1007, 1008, 1009, 1010]
            return !((error.underlyingError as? WebSocketClose).map { blamesClient.contains($0.code.rawValue) } ?? false)
        case .timedOut, .cannotConnect:
            return true
        case .unacceptableStatus:
            return policy.reconnectsAfterUnavailable && [429, 502, 503, 504].contains(error.response?.status.code ?? 0)
        default:
            return false
        }
    }

    /// Makes `socket` the current one; false when `close` came first.
    fileprivate func adopt(_ socket: WebSocket) -> Bool {
        shared.withLock { shared in
            guard !shared.closed else { return false }
            shared.current = socket
            return true
        }
    }

    fileprivate func release() {
        shared.withLock { $0.current = nil }
    }

    fileprivate var isClosed: Bool {
        shared.withLock { $0.closed }
    }
}
