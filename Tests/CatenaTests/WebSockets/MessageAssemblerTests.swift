import Foundation
import Testing
@testable import Catena

/// RFC 6455's rules for a server's frames, one value at a time, without a connection.
@Suite("WebSocket message assembly")
struct MessageAssemblerTests {
    private func frames(of message: WebSocketMessage, cuts: [Int], pings: Set<Int>) -> [WebSocketFrame] {
        let (opcode, payload): (WebSocketFrame.Opcode, Data) =
            switch message {
            case .text(let text): (.text, Data(text.utf8))
            case .binary(let data): (.binary, data)
            }
        let bounds = ([0] + cuts.filter { $0 > 0 && $0 < payload.count }.sorted() + [payload.count])
        var frames: [WebSocketFrame] = []
        for index in 0..<(bounds.count - 1) {
            let piece = payload.subdata(in: bounds[index]..<bounds[index + 1])
            frames.append(WebSocketFrame(index == 0 ? opcode : .continuation, fin: index == bounds.count - 2, payload: piece))
            if pings.contains(index), index < bounds.count - 2 { frames.append(WebSocketFrame(.ping, payload: Data([UInt8(index & 0xFF)]))) }
        }
        return frames
    }

    @Test("any message, cut into any fragments with pings between them, comes out whole (500 random cases)")
    func fragmentsReassemble() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<500 {
            let length = Int.random(in: 0...300, using: &generator)
            let message: WebSocketMessage =
                Bool.random(using: &generator)
                ? .binary(Data((0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }))
                : .text(String((0..<length).map { _ in ["a", "é", "👋", "字", " "].randomElement(using: &generator)! }))
            let cuts = (0..<Int.random(in: 0...6, using: &generator)).map { _ in Int.random(in: 0...max(1, message.byteCount), using: &generator) }
            let pings = Set((0..<3).map { _ in Int.random(in: 0...6, using: &generator) })
            var assembler = MessageAssembler(limit: 10_000)
            var out: [MessageAssembler.Event] = []
            for frame in frames(of: message, cuts: cuts, pings: pings) {
                let event = try assembler.take(frame)
                if event != .none { out.append(event) }
            }
            #expect(out.last == .message(message))
            #expect(out.dropLast().allSatisfy { if case .ping = $0 { true } else { false } })
        }
    }

    @Test("random bytes as a text message: taken exactly when they are UTF-8, else 1007 (2,000 random cases)")
    func utf8Validation() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let bytes = Data((0..<Int.random(in: 0...12, using: &generator)).map { _ in UInt8.random(in: 0x60...0xFF, using: &generator) })
            let split = Int.random(in: 0...bytes.count, using: &generator)
            var assembler = MessageAssembler(limit: 100)
            let valid = String(validating: bytes, as: UTF8.self)
            do {
                _ = try assembler.take(WebSocketFrame(.text, fin: false, payload: bytes.prefix(split)))
                let event = try assembler.take(WebSocketFrame(.continuation, payload: bytes.dropFirst(split)))
                #expect(valid.map { MessageAssembler.Event.message(.text($0)) } == event)
            } catch {
                #expect(valid == nil)
                #expect(error.code == .invalidPayload)
            }
        }
    }

    @Test("the size limit counts every fragment of a message")
    func sizeLimit() throws {
        var assembler = MessageAssembler(limit: 10)
        #expect(try assembler.take(WebSocketFrame(.binary, fin: false, payload: Data(count: 6))) == .none)
        #expect(throws: MessageAssembler.Violation.self) { try assembler.take(WebSocketFrame(.continuation, payload: Data(count: 5))) }
        var fresh = MessageAssembler(limit: 10)
        #expect(try fresh.take(WebSocketFrame(.binary, payload: Data(count: 10))) == .message(.binary(Data(count: 10))))
    }

    static let forbidden: [(WebSocketFrame, UInt16)] = [
        (WebSocketFrame(opcode: 1, masked: true, payload: Data("x".utf8)), UInt16(1002)),
        (WebSocketFrame(reservedBits: 4, opcode: 1), 1002),
        (WebSocketFrame(opcode: 3), 1002),
        (WebSocketFrame(opcode: 11), 1002),
        (WebSocketFrame(.ping, fin: false), 1002),
        (WebSocketFrame(.pong, payload: Data(count: 126)), 1002),
        (WebSocketFrame(.continuation), 1002),
        (WebSocketFrame(.close, payload: Data([3])), 1002),
        (WebSocketFrame(.close, payload: Data([0x03, 0xED])), 1002),  // 1005 may not be sent
        (WebSocketFrame(.close, payload: Data([0x0B, 0xB8 - 1])), 1002),  // 2999
        (WebSocketFrame(.close, payload: Data([0x03, 0xE8, 0xFF])), 1007),
    ]

    @Test("what a server may not send", arguments: forbidden)
    func refused(_ frame: WebSocketFrame, code: UInt16) {
        var assembler = MessageAssembler(limit: 100)
        #expect(throws: MessageAssembler.Violation.self) { try assembler.take(frame) }
        do { _ = try assembler.take(frame) } catch { #expect(error.code.rawValue == code) }
    }

    @Test("a new message may not begin inside a fragmented one")
    func interleavedMessages() throws {
        var assembler = MessageAssembler(limit: 100)
        _ = try assembler.take(WebSocketFrame(.text, fin: false, payload: Data("a".utf8)))
        #expect(throws: MessageAssembler.Violation.self) { try assembler.take(WebSocketFrame(.binary, payload: Data())) }
    }

    @Test("close frames: codes in the ranges that may be sent are read with their reason")
    func closeCodes() throws {
        for code in [1000, 1001, 1003, 1007, 1011, 1014, 3000, 4999] as [UInt16] {
            let close = try MessageAssembler.close(Data([UInt8(code >> 8), UInt8(code & 0xFF)]) + Data("why".utf8))
            #expect(close == WebSocketClose(code: WebSocketCloseCode(rawValue: code), reason: "why"))
        }
        #expect(try MessageAssembler.close(Data()) == WebSocketClose(code: .noStatusReceived))
    }

    @Test("a close reason is cut at a character boundary to fit a control frame")
    func closeReasonCut() {
        let payload = MessageAssembler.closePayload(.normalClosure, reason: String(repeating: "€", count: 60))
        #expect(payload.count <= 125)
        #expect(String(validating: payload.dropFirst(2), as: UTF8.self) == String(repeating: "€", count: 41))
        #expect(MessageAssembler.closePayload(nil, reason: "x").isEmpty)
    }

    @Test("a close reason is shown with control characters escaped")
    func printableReason() {
        let close = WebSocketClose(code: .internalError, reason: "bad\u{1B}[2J\u{7}")
        #expect(!close.description.unicodeScalars.contains { $0.properties.generalCategory == .control })
        #expect(close.description.hasPrefix("1011 (internal error): bad"))
    }
}
