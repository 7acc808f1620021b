package import Foundation

/// One frame as it crossed the wire, its payload unmasked: what a transport hands the
/// WebSocket engine and takes from it. The engine checks everything RFC 6455 asks of a
/// server's frames; the transport only parses and masks.
package struct WebSocketFrame: Sendable, Equatable {
    package enum Opcode: UInt8, Sendable {
        case continuation = 0, text = 1, binary = 2, close = 8, ping = 9, pong = 10
    }

    package var fin: Bool
    /// RSV1, RSV2 and RSV3 as the low three bits (RSV1 = 4).
    package var reservedBits: UInt8
    /// The opcode as sent: unknown ones are a protocol error the engine reports.
    package var opcode: UInt8
    /// Whether the sender masked the frame: a server must not.
    package var masked: Bool
    package var payload: Data

    package init(fin: Bool = true, reservedBits: UInt8 = 0, opcode: UInt8, masked: Bool = false, payload: Data = Data()) {
        self.fin = fin
        self.reservedBits = reservedBits
        self.opcode = opcode
        self.masked = masked
        self.payload = payload
    }

    package init(_ opcode: Opcode, fin: Bool = true, payload: Data = Data()) {
        self.init(fin: fin, opcode: opcode.rawValue, payload: payload)
    }
}

/// The frames of one upgraded connection, as a transport gives them.
///
/// One task receives; any task may write. `close()` may be called any number of times,
/// from any task: it ends the connection, and a `receive()` waiting then returns nil or
/// throws.
package protocol WebSocketFrameTransport: Sendable {
    /// The next frame, asking the socket for more only when called (backpressure); nil
    /// when the connection ended.
    func receive() async throws(WebSocketTransportError) -> WebSocketFrame?
    /// Masks `frame` and queues it behind every frame queued before, before it returns
    /// (so a caller's lock orders frames); the write it returns waits until it is out,
    /// or, for a data frame, may return once the connection has taken it.
    func enqueue(_ frame: WebSocketFrame) -> WebSocketWrite
    /// Closes the connection.
    func close() async
    /// The codec for the permessage-deflate the server agreed to; nil when this
    /// connection's messages come uncompressed whatever was agreed (a replay). Called
    /// once, before the first frame is received.
    func messageCodec(for agreed: PerMessageDeflate) throws(WebSocketTransportError) -> (any WebSocketMessageCodec)?
}

extension WebSocketFrameTransport {
    package func messageCodec(for agreed: PerMessageDeflate) throws(WebSocketTransportError) -> (any WebSocketMessageCodec)? { nil }
}

/// A frame on its way out: `wait()` returns once it was written, or throws why not.
package struct WebSocketWrite: Sendable {
    package let wait: @Sendable () async throws(WebSocketTransportError) -> Void

    package init(wait: @escaping @Sendable () async throws(WebSocketTransportError) -> Void) {
        self.wait = wait
    }
}

/// Why a transport could not read or write a frame.
package struct WebSocketTransportError: Error, Sendable {
    /// For a frame the transport's parser refused: the close code that says why.
    package var closeCode: WebSocketCloseCode?
    package var detail: String
    package var underlying: (any Error)?

    package init(closeCode: WebSocketCloseCode? = nil, _ detail: String, underlying: (any Error)? = nil) {
        self.closeCode = closeCode
        self.detail = detail
        self.underlying = underlying
    }
}

/// What `HTTPLoader.webSocket` asks of the transport, carried down the chain on the
/// upgrade request; the transport that opens the connection leaves it in `handoff`.
package enum WebSocketUpgrade: RequestOption {
    package static let defaultValue: Handoff? = nil

    /// Where a transport leaves the upgraded connection. The last one left wins; one left
    /// before it is closed (a middleware sent the upgrade again, after a 401).
    package final class Handoff: Sendable {
        private struct State {
            var frames: (any WebSocketFrameTransport)?
            var taken = false
            var bodyEnded = false
            var onBodyEnded: (@Sendable () -> Void)?
            var body: BodyChannel?
        }

        package let options: WebSocketOptions
        private let state = Locked(State())

        package init(options: WebSocketOptions) {
            self.options = options
        }

        /// The body of the 101: it lasts as long as the socket, so the middleware that
        /// watches streams (logs, metrics, a reset guard) see the socket as one; when the
        /// chain cancels it (a reset), the socket is closed.
        package func upgradeBody(for request: APIRequest) -> (ResponseBody, BodyChannel) {
            let channel = BodyChannel(request: request, window: 1, idle: nil) { [weak self] in self?.bodyEnded() }
            state.withLock { $0.body = channel }
            return (ResponseBody(channel: channel), channel)
        }

        /// Ends the 101's body as complete: the socket has ended.
        func finishBody() {
            state.withLock { $0.body }?.finish()
        }

        /// Runs `hook` once when the 101's body is cancelled (at once if it was).
        func whenBodyCancelled(_ hook: @escaping @Sendable () -> Void) {
            let now = state.withLock { state in
                if state.bodyEnded { return true }
                state.onBodyEnded = hook
                return false
            }
            if now { hook() }
        }

        private func bodyEnded() {
            let hook = state.withLock { state in
                state.bodyEnded = true
                defer { state.onBodyEnded = nil }
                return state.onBodyEnded
            }
            hook?()
        }

        /// Leaves `frames`; closes them at once when the socket's opener has already
        /// stopped waiting.
        package func deliver(_ frames: any WebSocketFrameTransport) async {
            let replaced: (any WebSocketFrameTransport)? = state.withLock { state in
                if state.taken { return frames }
                defer { state.frames = frames }
                return state.frames
            }
            await replaced?.close()
        }

        /// The connection left last, once; nil when none was.
        func take() -> (any WebSocketFrameTransport)? {
            state.withLock { state in
                state.taken = true
                defer { state.frames = nil }
                return state.frames
            }
        }
    }
}

extension APIRequest {
    /// Whether this request asks to be upgraded to a WebSocket (see `HTTPLoader.webSocket`):
    /// middleware that would send it twice or answer it from memory lets it pass.
    package var isWebSocketUpgrade: Bool {
        self[option: WebSocketUpgrade.self] != nil
    }
}

/// A message that crossed a WebSocket, as observers see it (a recorder, say).
package struct WebSocketMessageEvent: Sendable {
    /// Whether Catena sent it (else received it).
    package var sent: Bool
    package var message: WebSocketMessage
    package var time: Date
}

/// Observers of a WebSocket's messages, added by middleware to the upgrade request on
/// its way down: the socket calls each, in order, for every message sent and received.
/// They run on the socket's tasks, so they must be quick and never block.
package enum WebSocketObservers: RequestOption {
    package static let defaultValue: [@Sendable (WebSocketMessageEvent) -> Void] = []
}
