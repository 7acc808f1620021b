import Foundation

/// The engine of one ``WebSocket``: a task reads frames into messages, answers pings
/// and the close handshake; another pings while ``WebSocketOptions/pingInterval`` says
/// so. It ends when the connection does: `end` keeps the first close, finishes the
/// message queue once and ends the 101's body; `close()` waits for the reading task.
///
/// Every frame goes out through `enqueue`, under the state's lock, so nothing follows
/// a close frame (RFC 6455 section 5.5.1).
final class WebSocketSession: Sendable {
    private struct State {
        /// Whether a close frame was queued (by `close`, an echo, or a failure): no more
        /// frames go out, messages that arrive are dropped.
        var closeSent = false
        /// Set once, when the connection ended.
        var closed: WebSocketClose?
        var reading: Task<Void, Never>?
        var pinging: Task<Void, Never>?
        /// When a frame last arrived, or the reader last waited for the loop over the
        /// messages (a slow reader is no dead server).
        var lastHeard = ContinuousClock.now
        var waitingForReader = false
        /// Whether `end` ran: it runs once.
        var ended = false
    }

    let frames: any WebSocketFrameTransport
    let request: APIRequest
    let options: WebSocketOptions
    let queue: MessageQueue
    /// permessage-deflate's codec, when the server agreed to it.
    private let codec: (any WebSocketMessageCodec)?
    private let observers: [@Sendable (WebSocketMessageEvent) -> Void]
    /// The 101's body as the chain returned it, and the handoff that made it: both end
    /// with the socket (see `WebSocketUpgrade.Handoff.upgradeBody`).
    private let upgradeBody: ResponseBody?
    private let handoff: WebSocketUpgrade.Handoff?
    private let state = Locked(State())

    init(
        frames: any WebSocketFrameTransport, request: APIRequest, options: WebSocketOptions, codec: (any WebSocketMessageCodec)?,
        upgradeBody: ResponseBody?, handoff: WebSocketUpgrade.Handoff?
    ) {
        self.frames = frames
        self.codec = codec
        self.handoff = handoff
        self.request = request
        self.options = options
        self.upgradeBody = upgradeBody
        observers = request[option: WebSocketObservers.self]
        queue = MessageQueue(limit: options.bufferedBytes, request: request)
    }

    func start() {
        handoff?.whenBodyCancelled { [weak self] in self?.cancelledByChain() }
        // Both stored before either runs: an end that comes at once still stops the pings.
        state.withLock { state in
            state.reading = Task { await self.read() }
            state.pinging = options.pingInterval.map { interval in Task { await self.ping(every: interval) } }
        }
    }

    /// Whether a close frame went out or the connection ended.
    var isClosing: Bool {
        state.withLock { $0.closeSent || $0.closed != nil }
    }

    var closeStatus: WebSocketClose? {
        state.withLock { $0.closed }
    }

    func nextMessage() async throws(CatenaError) -> WebSocketMessage? {
        do {
            return try await queue.next()
        } catch {
            // A reader cancelled while waiting leaves: the socket goes with it.
            if error.code == .cancelled, Task.isCancelled { abandon() }
            throw error
        }
    }

    func send(_ message: WebSocketMessage) async throws(CatenaError) {
        let frame =
            switch message {
            case .text(let text): WebSocketFrame(.text, payload: Data(text.utf8))
            case .binary(let data): WebSocketFrame(.binary, payload: data)
            }
        guard let write = enqueue(frame, observing: message) else {
            throw CatenaError(.connectionLost, request: request, detail: "the WebSocket is \(closeStatus.map { "closed (\($0))" } ?? "closing")")
        }
        do {
            try await write.wait()
        } catch {
            throw CatenaError(.connectionLost, request: request, underlyingError: error.underlying, detail: "the WebSocket could not send: \(error.detail)")
        }
    }

    private func observe(_ message: WebSocketMessage, sent: Bool) {
        guard !observers.isEmpty else { return }
        let event = WebSocketMessageEvent(sent: sent, message: message, time: Date())
        for observer in observers { observer(event) }
    }

    /// Queues `frame` unless a close frame went out before it; a close frame marks the
    /// socket closing. Nil when the frame may not be sent.
    /// A sent message is observed under the same lock, before any answer to it can be.
    private func enqueue(_ frame: WebSocketFrame, observing message: WebSocketMessage? = nil) -> WebSocketWrite? {
        // A message is compressed outside the state's lock (pongs and the close never
        // wait for it), and queued before the codec lets the next message be compressed.
        if message != nil, let codec {
            guard !isClosing else { return nil }
            return codec.deflate(frame.payload) { payload in
                var compressed = frame
                compressed.payload = payload
                compressed.reservedBits = 4
                return queue(compressed, observing: message)
            }
        }
        return queue(frame, observing: message)
    }

    private func queue(_ frame: WebSocketFrame, observing message: WebSocketMessage?) -> WebSocketWrite? {
        let isClose = frame.opcode == WebSocketFrame.Opcode.close.rawValue
        return state.withLock { state in
            guard !state.closeSent, state.closed == nil else { return nil }
            if isClose { state.closeSent = true }
            if let message { observe(message, sent: true) }
            return frames.enqueue(frame)
        }
    }

    /// Waits for `write`, at most the close timeout: a server that stops reading must
    /// not hold a close forever (closing the connection fails the write).
    private func waitBounded(_ write: WebSocketWrite) async {
        let frames = frames
        let timeout = options.closeTimeout
        let deadline = Task {
            do { try await Task.sleep(for: timeout) } catch { return }
            await frames.close()
        }
        try? await write.wait()
        deadline.cancel()
    }

    private func enqueueClose(_ code: WebSocketCloseCode?, reason: String = "") -> WebSocketWrite? {
        enqueue(WebSocketFrame(.close, payload: MessageAssembler.closePayload(code, reason: reason)))
    }

    func close(_ code: WebSocketCloseCode, reason: String) async {
        let code = code.mayBeSent ? code : .normalClosure
        // One deadline for the whole close: the write, the server's answer, its end.
        let frames = frames
        let timeout = options.closeTimeout
        let deadline = Task {
            do { try await Task.sleep(for: timeout) } catch { return }
            await frames.close()
        }
        if let write = enqueueClose(code, reason: reason) {
            // Messages still unread stay readable; what arrives from here is dropped, and
            // a reading task waiting for room is let go.
            queue.finish(nil)
            try? await write.wait()
        }
        let reading = state.withLock { $0.reading }
        await withTaskCancellationHandler {
            await reading?.value
        } onCancel: {
            Task { await frames.close() }
        }
        deadline.cancel()
    }

    /// Closes with 1001 (going away) in the background: nobody holds the socket any more,
    /// or its reader was cancelled.
    func abandon() {
        guard !isClosing else { return }
        Task { await self.close(.goingAway, reason: "") }
    }

    /// The chain cancelled the 101's body (a reset): the loop ends with `cancelled`, the
    /// socket closes with 1001.
    func cancelledByChain() {
        queue.finish(CatenaError(.cancelled, request: request, detail: "the chain was reset, or its middleware cancelled the WebSocket"))
        abandon()
    }

    private func read() async {
        var assembler = MessageAssembler(limit: options.maximumMessageSize, codec: codec)
        while true {
            let frame: WebSocketFrame?
            do {
                frame = try await frames.receive()
            } catch {
                if let code = error.closeCode {
                    return await fail(code, CatenaError(.invalidResponse, request: request, underlyingError: error.underlying, detail: error.detail))
                }
                return await endedAbruptly(
                    CatenaError(
                        .connectionLost, request: request, underlyingError: error.underlying, detail: "the WebSocket's connection failed: \(error.detail)"))
            }
            guard let frame else {
                return await endedAbruptly(
                    CatenaError(.connectionLost, request: request, detail: "the server ended the WebSocket's connection without a close frame (1006)"))
            }
            state.withLock { $0.lastHeard = .now }
            let event: MessageAssembler.Event
            do {
                event = try assembler.take(frame)
            } catch {
                return await fail(error.code, CatenaError(.invalidResponse, request: request, detail: error.detail))
            }
            switch event {
            case .none, .pong:
                continue
            case .message(let message):
                guard !isClosing else { continue }
                observe(message, sent: false)
                state.withLock { $0.waitingForReader = true }
                _ = await queue.push(message)
                state.withLock { state in
                    state.waitingForReader = false
                    state.lastHeard = .now
                }
            case .ping(let payload):
                // Not awaited: a server that does not read must not stop this reader.
                _ = enqueue(WebSocketFrame(.pong, payload: payload))
            case .close(let close):
                // The echo carries the server's code, as RFC 6455 section 5.5.1 suggests.
                let echo = enqueueClose(close.code == .noStatusReceived ? nil : close.code)
                if let echo {
                    await waitBounded(echo)
                }
                // The server closes the connection first (RFC 6455 section 7.1.1).
                await waitForServerToClose()
                let error: CatenaError? =
                    echo == nil || close.isNormal
                    ? nil
                    : CatenaError(.connectionLost, request: request, underlyingError: close, detail: "the server closed the WebSocket with \(close)")
                return await end(close, error: error)
            }
        }
    }

    /// Reads (and drops) until the server closes the connection, at most the close timeout.
    private func waitForServerToClose() async {
        let frames = frames
        let timeout = options.closeTimeout
        let deadline = Task {
            do { try await Task.sleep(for: timeout) } catch { return }
            await frames.close()
        }
        while (try? await frames.receive()) != nil {}
        deadline.cancel()
    }

    /// Fails the connection for a frame that broke the protocol: a close frame with
    /// `code`, then the connection is closed without waiting (RFC 6455 section 7.1.7).
    private func fail(_ code: WebSocketCloseCode, _ error: CatenaError) async {
        guard let write = enqueueClose(code) else {
            // Already closing on our side: the end is the one asked for.
            return await end(WebSocketClose(code: code, reason: error.detail ?? ""), error: nil)
        }
        await waitBounded(write)
        await end(WebSocketClose(code: code, reason: error.detail ?? ""), error: error)
    }

    /// The connection is over: closes it, keeps the first `close` seen, ends the
    /// messages with `error` (nil: orderly), stops the pings and ends the 101's body.
    private func end(_ close: WebSocketClose, error: CatenaError?) async {
        let (first, pinging) = state.withLock { state in
            defer { state.ended = true }
            if state.closed == nil { state.closed = close }
            return (!state.ended, state.pinging)
        }
        guard first else { return }
        await frames.close()
        pinging?.cancel()
        queue.finish(error)
        handoff?.finishBody()
        // Read to its end, so the middleware watching it see a stream that ended well; a
        // body some middleware made endless is cancelled after the close timeout.
        if let upgradeBody {
            let timeout = options.closeTimeout
            let deadline = Task {
                do { try await Task.sleep(for: timeout) } catch { return }
                upgradeBody.cancel()
            }
            _ = try? await upgradeBody.collect(upTo: 1)
            deadline.cancel()
        }
    }

    /// The connection ended without a close frame: an error, unless Catena had sent
    /// its close and was waiting for the answer.
    private func endedAbruptly(_ error: CatenaError) async {
        let closing = state.withLock { $0.closeSent }
        await end(WebSocketClose(code: .abnormalClosure), error: closing ? nil : error)
    }

    private func ping(every interval: Duration) async {
        while !Task.isCancelled {
            do { try await Task.sleep(for: interval) } catch { return }
            let sent = ContinuousClock.now
            // Not awaited: the pong's deadline starts now, written or not.
            guard enqueue(WebSocketFrame(.ping, payload: Data("catena".utf8))) != nil else { return }
            do { try await Task.sleep(for: options.pongTimeout) } catch { return }
            let silent = state.withLock { $0.lastHeard < sent && !$0.waitingForReader && !$0.closeSent }
            if silent {
                let seconds = Double(options.pongTimeout.components.seconds) + Double(options.pongTimeout.components.attoseconds) / 1e18
                let error = CatenaError(.timedOut, request: request, detail: "the server answered no ping within \(seconds) s (WebSocketOptions.pongTimeout)")
                return await end(WebSocketClose(code: .abnormalClosure), error: error)
            }
        }
    }
}
