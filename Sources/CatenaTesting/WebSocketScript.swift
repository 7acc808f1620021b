public import Catena
import Foundation

/// A WebSocket conversation for tests, played by ``MockTransport/onWebSocket(_:_:)``
/// and by ``HARReplayTransport`` from a recording: what the server says first, and what
/// it answers each message the client sends.
///
/// ```swift
/// mock.onWebSocket("/ws/chat", WebSocketScript([
///     .receive(.text("welcome")),
///     .send,                       // the client's first message…
///     .receive(.text("got it")),   // …is answered with this
/// ]))
/// ```
///
/// Steps after the last `.send` the client made wait for its next message. A ping is
/// answered with a pong; the client's close frame is echoed and ends the connection;
/// `.close` closes it from the server's side.
public struct WebSocketScript: Sendable {
    /// One step of the conversation.
    public enum Step: Sendable, Equatable {
        /// The server sends this message.
        case receive(WebSocketMessage)
        /// The script waits for the client's next message (whatever it holds).
        case send
        /// The server closes with this code and reason.
        case close(WebSocketCloseCode, reason: String)
    }

    public var steps: [Step]

    public init(_ steps: [Step]) {
        self.steps = steps
    }

    /// The frames of one connection playing this script.
    func frames() -> ScriptedWebSocketFrames {
        ScriptedWebSocketFrames(steps)
    }
}

/// A connection that plays a script: frames for the engine to receive, answers to what
/// it enqueues. Everything happens in memory, in order, under one lock.
final class ScriptedWebSocketFrames: WebSocketFrameTransport {
    private struct State {
        var steps: [WebSocketScript.Step]
        var next = 0
        var pending: [WebSocketFrame] = []
        var ended = false
        var receiver: UnsafeContinuation<WebSocketFrame?, Never>?
    }

    private let state: Locked<State>

    init(_ steps: [WebSocketScript.Step]) {
        state = Locked(State(steps: steps))
        state.withLock { Self.play(&$0) }
    }

    /// Queues the server's frames up to the next `.send`.
    private static func play(_ state: inout State) {
        while state.next < state.steps.count {
            let step = state.steps[state.next]
            state.next += 1
            switch step {
            case .send: return
            case .receive(.text(let text)): state.pending.append(WebSocketFrame(.text, payload: Data(text.utf8)))
            case .receive(.binary(let data)): state.pending.append(WebSocketFrame(.binary, payload: data))
            case .close(let code, let reason):
                state.pending.append(WebSocketFrame(.close, payload: MessageAssembler.closePayload(code, reason: reason)))
                state.steps = []
                return
            }
        }
    }

    func receive() async throws(WebSocketTransportError) -> WebSocketFrame? {
        await withUnsafeContinuation { continuation in
            let now: WebSocketFrame?? = state.withLock { state in
                if !state.pending.isEmpty { return .some(state.pending.removeFirst()) }
                if state.ended { return .some(nil) }
                state.receiver = continuation
                return nil
            }
            if let now { continuation.resume(returning: now) }
        }
    }

    func enqueue(_ frame: WebSocketFrame) -> WebSocketWrite {
        let receiver = state.withLock { state -> (UnsafeContinuation<WebSocketFrame?, Never>, WebSocketFrame?)? in
            guard !state.ended else { return nil }
            switch WebSocketFrame.Opcode(rawValue: frame.opcode) {
            case .text, .binary: Self.play(&state)
            case .ping: state.pending.append(WebSocketFrame(.pong, payload: frame.payload))
            case .close:
                state.pending.append(WebSocketFrame(.close, payload: frame.payload))
                state.ended = true
            default: break
            }
            guard let receiver = state.receiver else { return nil }
            if !state.pending.isEmpty {
                state.receiver = nil
                return (receiver, state.pending.removeFirst())
            }
            guard state.ended else { return nil }  // the receiver waits on
            state.receiver = nil
            return (receiver, nil)
        }
        if let (receiver, frame) = receiver { receiver.resume(returning: frame) }
        return WebSocketWrite {}
    }

    func close() async {
        let receiver = state.withLock { state in
            state.ended = true
            state.pending = []
            defer { state.receiver = nil }
            return state.receiver
        }
        receiver?.resume(returning: nil)
    }
}
