#if AsyncHTTPClient
import Catena
import Foundation
import NIOCore
import NIOFoundationCompat
import NIOWebSocket

/// The frames of an upgraded channel, as Catena's WebSocket engine takes them.
///
/// The channel reads only when asked (`autoRead` off): a `receive()` with nothing
/// buffered asks for one read, and the inbox asks for more only while a receiver waits
/// and no whole frame has come. So a slow reader stops the reads from the socket, and
/// at most one read's frames wait here.
final class ChannelFrames: WebSocketFrameTransport {
    private struct State {
        var frames: [Catena.WebSocketFrame] = []
        var head = 0
        /// Set once: nil for the connection's orderly end.
        var end: WebSocketTransportError??
        var receiver: UnsafeContinuation<Result<Catena.WebSocketFrame?, WebSocketTransportError>, Never>?
    }

    /// Frames sent and not yet handed to the channel, in their order.
    private struct Outbox {
        var frames: [(NIOWebSocket.WebSocketFrame, EventLoopPromise<Void>?)] = []
        var bytes = 0
        /// Whether an event-loop task that writes them is on its way.
        var scheduled = false
    }

    /// How many bytes may wait in the outbox before a sender waits for its own write.
    private static let unwaitedBytes = 64 * 1024

    let channel: any Channel
    private let state = Locked(State())
    private let outbox = Locked(Outbox())

    init(_ channel: any Channel) {
        self.channel = channel
    }

    func receive() async throws(WebSocketTransportError) -> Catena.WebSocketFrame? {
        let result = await withTaskCancellationHandler {
            await withUnsafeContinuation { continuation in
                let now: Result<Catena.WebSocketFrame?, WebSocketTransportError>? = state.withLock { state in
                    if state.head < state.frames.count {
                        defer {
                            state.head += 1
                            if state.head == state.frames.count {
                                state.frames.removeAll(keepingCapacity: true)
                                state.head = 0
                            }
                        }
                        return .success(state.frames[state.head])
                    }
                    if let end = state.end { return end.map { .failure($0) } ?? .success(nil) }
                    state.receiver = continuation
                    return nil
                }
                if let now {
                    continuation.resume(returning: now)
                } else {
                    channel.read()
                }
            }
        } onCancel: {
            channel.close(promise: nil)
        }
        return try result.get()
    }

    func enqueue(_ frame: Catena.WebSocketFrame) -> WebSocketWrite {
        guard let opcode = WebSocketOpcode(encodedWebSocketOpcode: frame.opcode) else {
            return WebSocketWrite { () throws(WebSocketTransportError) in throw WebSocketTransportError("no frame with opcode \(frame.opcode) is sent") }
        }
        let outgoing = NIOWebSocket.WebSocketFrame(
            fin: frame.fin, rsv1: frame.reservedBits & 4 != 0, opcode: opcode, maskKey: .random(), data: ByteBuffer(data: frame.payload))
        let isData = opcode == .text || opcode == .binary || opcode == .continuation
        let (promise, schedules) = outbox.withLock { outbox -> (EventLoopPromise<Void>?, Bool) in
            // A data frame's sender goes on at once while the connection takes writes and
            // little waits here; else it waits for its write, which bounds what queues.
            // A closed channel stays writable: its write must fail the send.
            let waits = !isData || outbox.bytes + frame.payload.count > Self.unwaitedBytes || !channel.isWritable || !channel.isActive
            let promise = waits ? channel.eventLoop.makePromise(of: Void.self) : nil
            outbox.frames.append((outgoing, promise))
            outbox.bytes += frame.payload.count
            defer { outbox.scheduled = true }
            return (promise, !outbox.scheduled)
        }
        // One event-loop task writes every frame queued meanwhile, then flushes once.
        if schedules { channel.eventLoop.execute { self.writeOutbox() } }
        guard let promise else {
            // Written without a wait: a write that fails closes the connection, and the
            // next send finds it inactive and fails with it.
            return WebSocketWrite {}
        }
        return WebSocketWrite { () throws(WebSocketTransportError) in
            do {
                try await promise.futureResult.get()
            } catch {
                throw WebSocketTransportError("\(error)", underlying: error)
            }
        }
    }

    /// Hands the queued frames to the channel in their order, on the event loop.
    private func writeOutbox() {
        let frames = outbox.withLock { outbox in
            defer {
                outbox.frames = []
                outbox.bytes = 0
                outbox.scheduled = false
            }
            return outbox.frames
        }
        for (frame, promise) in frames { channel.write(frame, promise: promise) }
        channel.flush()
    }

    func messageCodec(for agreed: PerMessageDeflate) throws(WebSocketTransportError) -> (any WebSocketMessageCodec)? {
        try ZlibMessageCodec(agreed)
    }

    func close() async {
        channel.close(promise: nil)
        // Waits for the end, so a closed socket holds no descriptor.
        try? await channel.closeFuture.get()
        // A receiver waits no longer, whether or not the end reached the inbox.
        finish(nil)
    }

    /// A frame from the inbox, on the event loop: to the waiting receiver, or kept.
    fileprivate func deliver(_ frame: Catena.WebSocketFrame) {
        let receiver = state.withLock { state in
            // After an orderly end too: frames the upgrade held back arrive after a
            // connection that ended meanwhile was seen to end (the server's whole
            // conversation, then its close, came with the 101). They are read before the end.
            if case .some(.some) = state.end { return nil as UnsafeContinuation<Result<Catena.WebSocketFrame?, WebSocketTransportError>, Never>? }
            if let receiver = state.receiver {
                state.receiver = nil
                return receiver
            }
            state.frames.append(frame)
            return nil
        }
        receiver?.resume(returning: .success(frame))
    }

    fileprivate func finish(_ error: WebSocketTransportError?) {
        let receiver = state.withLock { state in
            if state.end == nil { state.end = .some(error) }
            defer { state.receiver = nil }
            return state.receiver
        }
        receiver?.resume(returning: error.map { .failure($0) } ?? .success(nil))
    }

    /// Whether a receiver waits with nothing buffered: the inbox then reads again.
    fileprivate var isStarved: Bool {
        state.withLock { $0.receiver != nil && $0.end == nil }
    }
}

/// The last handler of an upgraded channel: hands its frames to a `ChannelFrames`.
final class FrameInbox: ChannelInboundHandler, Sendable {
    typealias InboundIn = NIOWebSocket.WebSocketFrame
    private let frames: ChannelFrames

    init(_ frames: ChannelFrames) {
        self.frames = frames
    }

    func handlerAdded(context: ChannelHandlerContext) {
        // A connection that ended during the upgrade may send no channelInactive this way.
        // Its end is marked a turn later, after the upgrade has passed on the bytes that
        // followed the 101: the session, woken by the upgrade, must find them first.
        guard context.channel.isActive else {
            let frames = frames
            return context.eventLoop.execute { frames.finish(nil) }
        }
        context.channel.setOption(ChannelOptions.autoRead, value: false).whenFailure { _ in }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        var payload = frame.data
        if let key = frame.maskKey { payload.webSocketUnmask(key) }
        frames.deliver(
            Catena.WebSocketFrame(
                fin: frame.fin, reservedBits: (frame.rsv1 ? 4 : 0) | (frame.rsv2 ? 2 : 0) | (frame.rsv3 ? 1 : 0),
                opcode: UInt8(webSocketOpcode: frame.opcode), masked: frame.maskKey != nil,
                payload: Data(buffer: payload, byteTransferStrategy: .automatic)))
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // A frame longer than one read needs more reads before it is whole.
        if frames.isStarved { context.read() }
        context.fireChannelReadComplete()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        let failure: WebSocketTransportError
        switch error as? NIOWebSocketError {
        case .invalidFrameLength:
            failure = WebSocketTransportError(closeCode: .messageTooBig, "a frame is larger than WebSocketOptions.maximumMessageSize", underlying: error)
        case .fragmentedControlFrame:
            failure = WebSocketTransportError(closeCode: .protocolError, "a control frame is fragmented", underlying: error)
        case .multiByteControlFrameLength:
            failure = WebSocketTransportError(closeCode: .protocolError, "a control frame is longer than 125 bytes", underlying: error)
        default:
            failure = WebSocketTransportError("\(error)", underlying: error)
        }
        frames.finish(failure)
        // The engine sends its close frame first when the failure has a code.
        if failure.closeCode == nil { context.close(promise: nil) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        frames.finish(nil)
        context.fireChannelInactive()
    }
}
#endif  // AsyncHTTPClient
