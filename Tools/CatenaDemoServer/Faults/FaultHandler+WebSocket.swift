#if DemoServer
import Crypto
import Foundation
import NIOCore

extension MisbehavingServer {
    /// WebSocket upgrades that go wrong, at `/ws-NAME`: each accepts the upgrade (but
    /// `badAccept`) and then breaks RFC 6455 in one way.
    public enum WebSocketFault: String, CaseIterable, Sendable {
        /// A text frame masked by the server.
        case masked = "ws-masked"
        /// A frame with RSV1 set, no extension agreed.
        case reservedBits = "ws-reserved-bits"
        /// A frame with the reserved opcode 3.
        case unknownOpcode = "ws-unknown-opcode"
        /// A text message that is not UTF-8, in two fragments.
        case invalidUTF8 = "ws-invalid-utf8"
        /// A frame header announcing 1 TiB.
        case oversizeFrame = "ws-oversize-frame"
        /// Fragments of 64 KiB without end.
        case oversizeMessage = "ws-oversize-message"
        /// A ping with FIN clear.
        case fragmentedControl = "ws-fragmented-control"
        /// A ping of 126 bytes.
        case longControl = "ws-long-control"
        /// A continuation frame with no message begun.
        case strayContinuation = "ws-stray-continuation"
        /// A message, then a close frame without a code.
        case closeWithoutCode = "ws-close-without-code"
        /// A close frame with one byte.
        case closeOneByte = "ws-close-one-byte"
        /// A close with 1011 and a reason holding terminal escapes.
        case abnormalClose = "ws-abnormal-close"
        /// The connection ends right after the upgrade.
        case abrupt = "ws-abrupt"
        /// Never answers a close (nor anything else).
        case neverCloses = "ws-never-closes"
        /// Upgrades, then reads nothing more: what the client sends fills the
        /// connection's buffers.
        case unread = "ws-unread"
        /// A 101 whose Sec-WebSocket-Accept is wrong.
        case badAccept = "ws-bad-accept"
        /// A text message split in fragments with a ping between them, then a close (1000).
        case interleavedPing = "ws-interleaved-ping"
        /// The 101, three text messages and a close (1000) in one write, then the
        /// connection's end at once: a server with all it has to say at the upgrade.
        case burst = "ws-burst"
        /// permessage-deflate accepted, then a 53 KB compressed message that inflates to
        /// 8 MiB of zeros.
        case deflateBomb = "ws-deflate-bomb"
        /// permessage-deflate accepted, then a compressed message that is no DEFLATE data.
        case deflateCorrupt = "ws-deflate-corrupt"
    }
}

extension FaultHandler {
    /// Answers an upgrade at `target` with its WebSocket fault.
    func answerWebSocket(_ target: String, key: String) {
        let name = String(target.dropFirst().prefix { $0 != "?" && $0 != "/" })
        guard let fault = MisbehavingServer.WebSocketFault(rawValue: name) else {
            return closeAfter("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
        }
        let digest = Insecure.SHA1.hash(data: Data((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8))
        let accept = fault == .badAccept ? "d3Jvbmcgd3Jvbmcgd3Jvbmc=" : Data(digest).base64EncodedString()
        let deflates = fault == .deflateBomb || fault == .deflateCorrupt
        let head =
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: \(accept)\r\n"
            + (deflates ? "Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n" : "\r\n")
        if fault == .burst {
            let messages: [UInt8] = ["one", "two", "three"].flatMap { (text: String) -> [UInt8] in [0x81, UInt8(text.utf8.count)] + Array(text.utf8) }
            // Corked, the bytes and the FIN leave in one segment, so the client is told of
            // the end in the same wake-up as it reads the 101 (TCP_CORK is 3 on Linux).
            let cork = ChannelOptions.Types.SocketOption(level: .tcp, name: .init(rawValue: 3))
            _ = try? channel.syncOptions?.setOption(cork, value: 1)
            channel.writeAndFlush(ByteBuffer(bytes: Array(head.utf8) + messages + [0x88, 0x02, 0x03, 0xE8]), promise: nil)
            channel.close(promise: nil)
            return
        }
        write(head)
        switch fault {
        case .masked: write([0x81, 0x82, 1, 2, 3, 4, UInt8(ascii: "h") ^ 1, UInt8(ascii: "i") ^ 2])
        case .reservedBits: write([0xC1, 0x02] + Array("hi".utf8))
        case .unknownOpcode: write([0x83, 0x02] + Array("hi".utf8))
        case .invalidUTF8: write([0x01, 0x02, 0x68, 0xC3] + [0x80, 0x01, 0xFF])
        case .oversizeFrame: write([0x82, 0x7F, 0, 0, 1, 0, 0, 0, 0, 0])
        case .oversizeMessage:
            // 64 MiB in 64 KiB fragments, stopping when the client leaves.
            write([0x02, 0x7E, 0x01, 0x00] + [UInt8](repeating: 0x61, count: 256))
            Self.writeFragments(to: channel, left: 1024)
        case .fragmentedControl: write([0x09, 0x00])
        case .longControl: write([0x89, 0x7E, 0x00, 0x7E] + [UInt8](repeating: 0x70, count: 126))
        case .strayContinuation: write([0x80, 0x02] + Array("hi".utf8))
        case .closeWithoutCode: closeAfter([0x81, 0x05] + Array("hello".utf8) + [0x88, 0x00])
        case .closeOneByte: write([0x88, 0x01, 0x03])
        case .abnormalClose:
            let reason = Array("boom \u{1B}[31mred".utf8)
            closeAfter([0x88, UInt8(2 + reason.count), 0x03, 0xF3] + reason)
        case .abrupt: channel.close(promise: nil)
        case .unread: channel.setOption(ChannelOptions.autoRead, value: false).whenFailure { _ in }
        case .neverCloses, .badAccept, .burst: break
        case .deflateBomb:
            // The gzip bomb's DEFLATE stream, without gzip's header and trailer.
            let deflate = Array(Gzip.bomb.dropFirst(10).dropLast(8))
            write([0xC2, 0x7E, UInt8(deflate.count >> 8), UInt8(deflate.count & 0xFF)] + deflate)
        case .deflateCorrupt:
            // Block type 3, which DEFLATE reserves.
            write([0xC1, 0x04, 0xFF, 0xFF, 0xFF, 0xFF])
        case .interleavedPing:
            closeAfter([0x01, 0x03] + Array("hel".utf8) + [0x89, 0x02] + Array("pi".utf8) + [0x80, 0x02] + Array("lo".utf8) + [0x88, 0x02, 0x03, 0xE8])
        }
    }

    /// Writes `bytes` (ending in a close frame), then closes the connection once the
    /// client answers, as a server does (closing first could reset the connection
    /// before the client has read the close frame), or after 10 s.
    private func closeAfter(_ bytes: [UInt8]) {
        closesOnInput = true
        let channel = channel
        channel.writeAndFlush(ByteBuffer(bytes: bytes), promise: nil)
        channel.eventLoop.scheduleTask(in: .seconds(10)) { channel.close(promise: nil) }
    }

    private static func writeFragments(to channel: any Channel, left: Int) {
        guard left > 0, channel.isActive else { return }
        let fragment: [UInt8] = [0x00, 0x7F, 0, 0, 0, 0, 0, 1, 0, 0] + [UInt8](repeating: 0x61, count: 64 * 1024)
        channel.writeAndFlush(ByteBuffer(bytes: fragment)).whenSuccess {
            writeFragments(to: channel, left: left - 1)
        }
    }
}
#endif  // DemoServer
