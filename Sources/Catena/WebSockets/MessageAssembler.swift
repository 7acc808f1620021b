package import Foundation

/// Reads a server's frames into messages, enforcing RFC 6455: unmasked frames, no
/// reserved bits (but RFC 7692's RSV1 when permessage-deflate was agreed) or opcodes, whole small control frames between fragments, one message
/// at a time, a size limit over all fragments, UTF-8 text and well-formed close frames.
/// A value with no I/O, so every rule is tested without a connection.
package struct MessageAssembler {
    enum Event: Equatable {
        /// A fragment was taken; the message goes on.
        case none
        case message(WebSocketMessage)
        case ping(Data)
        case pong(Data)
        case close(WebSocketClose)
    }

    /// A frame that breaks the protocol: the code the connection is closed with, and why.
    struct Violation: Error, Equatable {
        let code: WebSocketCloseCode
        let detail: String
    }

    let limit: Int
    /// The permessage-deflate codec, when the server agreed to it: RSV1 on a message's
    /// first frame then says the message is compressed (RFC 7692 section 6).
    private let codec: (any WebSocketMessageCodec)?
    private var fragments = Data()
    private var fragmentedOpcode: WebSocketFrame.Opcode?
    private var fragmentsCompressed = false

    init(limit: Int, codec: (any WebSocketMessageCodec)? = nil) {
        self.limit = limit
        self.codec = codec
    }

    mutating func take(_ frame: WebSocketFrame) throws(Violation) -> Event {
        guard !frame.masked else { throw Violation(code: .protocolError, detail: "the server masked a frame, which only a client may do") }
        guard let opcode = WebSocketFrame.Opcode(rawValue: frame.opcode) else {
            throw Violation(code: .protocolError, detail: "a frame has the unknown opcode \(frame.opcode)")
        }
        let compressed = codec != nil && frame.reservedBits == 4 && (opcode == .text || opcode == .binary)
        guard frame.reservedBits == 0 || compressed else {
            throw Violation(code: .protocolError, detail: "a frame has reserved bits set (\(frame.reservedBits)) that no extension agreed to")
        }
        switch opcode {
        case .close, .ping, .pong:
            guard frame.fin else { throw Violation(code: .protocolError, detail: "a control frame (opcode \(frame.opcode)) is fragmented") }
            guard frame.payload.count <= 125 else {
                throw Violation(code: .protocolError, detail: "a control frame (opcode \(frame.opcode)) carries \(frame.payload.count) bytes, over 125")
            }
            switch opcode {
            case .ping: return .ping(frame.payload)
            case .pong: return .pong(frame.payload)
            default: return .close(try Self.close(frame.payload))
            }
        case .continuation:
            guard let started = fragmentedOpcode else {
                throw Violation(code: .protocolError, detail: "a continuation frame arrived with no message to continue")
            }
            try append(frame.payload)
            guard frame.fin else { return .none }
            fragmentedOpcode = nil
            defer { fragments = Data() }
            return .message(try message(started, fragments, compressed: fragmentsCompressed))
        case .text, .binary:
            guard fragmentedOpcode == nil else {
                throw Violation(code: .protocolError, detail: "a new message began before the fragmented one ended")
            }
            guard frame.payload.count <= limit else { throw tooBig(frame.payload.count) }
            guard frame.fin else {
                fragmentedOpcode = opcode
                fragments = frame.payload
                fragmentsCompressed = compressed
                return .none
            }
            return .message(try message(opcode, frame.payload, compressed: compressed))
        }
    }

    private mutating func append(_ payload: Data) throws(Violation) {
        guard payload.count <= limit - fragments.count else { throw tooBig(fragments.count + payload.count) }
        fragments.append(payload)
    }

    private func tooBig(_ size: Int) -> Violation {
        Violation(code: .messageTooBig, detail: "a message reached \(size) bytes, over the limit of \(limit) (WebSocketOptions.maximumMessageSize)")
    }

    /// The message, inflated first when it came compressed: the limit holds for what it
    /// inflates to, and UTF-8 is checked on that.
    private func message(_ opcode: WebSocketFrame.Opcode, _ payload: Data, compressed: Bool) throws(Violation) -> WebSocketMessage {
        var payload = payload
        if compressed, let codec {
            do {
                payload = try codec.inflate(payload, limit: limit)
            } catch {
                switch error {
                case .tooBig:
                    throw Violation(
                        code: .messageTooBig, detail: "a compressed message inflates to over the limit of \(limit) bytes (WebSocketOptions.maximumMessageSize)")
                case .corrupt(let why):
                    throw Violation(code: .invalidPayload, detail: "a compressed message is not valid DEFLATE data (\(WebSocketClose.printable(why)))")
                }
            }
        }
        guard opcode == .text else { return .binary(payload) }
        guard let text = String(validating: payload, as: UTF8.self) else {
            throw Violation(code: .invalidPayload, detail: "a text message of \(payload.count) bytes is not valid UTF-8")
        }
        return .text(text)
    }

    /// A close frame's payload: nothing, or a code that may be sent and a UTF-8 reason.
    static func close(_ payload: Data) throws(Violation) -> WebSocketClose {
        guard !payload.isEmpty else { return WebSocketClose(code: .noStatusReceived) }
        guard payload.count >= 2 else { throw Violation(code: .protocolError, detail: "a close frame carries 1 byte, too few for a code") }
        let start = payload.startIndex
        let code = WebSocketCloseCode(rawValue: UInt16(payload[start]) << 8 | UInt16(payload[start + 1]))
        guard code.mayBeSent else { throw Violation(code: .protocolError, detail: "a close frame carries the code \(code.rawValue), which may not be sent") }
        guard let reason = String(validating: payload.dropFirst(2), as: UTF8.self) else {
            throw Violation(code: .invalidPayload, detail: "a close frame's reason is not valid UTF-8")
        }
        return WebSocketClose(code: code, reason: reason)
    }

    /// A close frame's payload for `code` and `reason`, the reason cut at a character
    /// boundary to fit the 125 bytes of a control frame.
    package static func closePayload(_ code: WebSocketCloseCode?, reason: String) -> Data {
        guard let code else { return Data() }
        var payload = Data([UInt8(code.rawValue >> 8), UInt8(code.rawValue & 0xFF)])
        var room = 123
        for character in reason {
            let bytes = character.utf8.count
            guard bytes <= room else { break }
            payload.append(contentsOf: character.utf8)
            room -= bytes
        }
        return payload
    }
}
