#if DemoServer
import Catena
import Foundation
import NIOCore
import NIOPosix

/// Reads one request head (and its declared body) at a time and answers with the fault
/// its path names.
final class FaultHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    let channel: any Channel
    private let counters: Counters
    private var buffer = ByteBuffer()
    /// Once a fault has taken over the connection, nothing more is read.
    private var done = false
    /// After a WebSocket fault's close frame: the client's answer ends the connection.
    var closesOnInput = false

    init(channel: any Channel, counters: Counters) {
        self.channel = channel
        self.counters = counters
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !done else {
            // A fault owns the connection: input is dropped, or ends it (a close answered).
            if closesOnInput { channel.close(promise: nil) }
            return
        }
        var incoming = unwrapInboundIn(data)
        buffer.writeBuffer(&incoming)
        while !done, let (target, key, webSocketKey, consumed) = nextRequest() {
            buffer.moveReaderIndex(forwardBy: consumed)
            buffer.discardReadBytes()
            if target.hasPrefix("/ws-") {
                done = true
                answerWebSocket(target, key: webSocketKey ?? "")
                return
            }
            answer(target, idempotencyKey: key)
        }
    }

    /// The request target, its `Idempotency-Key`, and the bytes the request takes, once
    /// it is all here.
    private func nextRequest() -> (String, String?, String?, Int)? {
        let view = buffer.readableBytesView
        guard let end = view.firstRange(of: [13, 10, 13, 10]) else {
            if buffer.readableBytes > 64 * 1024 { done = true; channel.close(promise: nil) }
            return nil
        }
        let head = String(decoding: view[view.startIndex..<end.lowerBound], as: UTF8.self)
        let lines = head.split(separator: "\r\n")
        let parts = lines.first?.split(separator: " ") ?? []
        let fields = lines.dropFirst().map { $0.split(separator: ":", maxSplits: 1) }
        let chunked = fields.contains { $0.first?.lowercased() == "transfer-encoding" }
        let length =
            fields.compactMap { pair -> Int? in
                guard pair.count == 2, pair[0].lowercased() == "content-length" else { return nil }
                return Int(pair[1].trimmingCharacters(in: .whitespaces))
            }.first ?? 0
        // Only small, counted request bodies: anything else ends the connection.
        guard !chunked, (0...(16 << 20)).contains(length) else {
            done = true
            channel.close(promise: nil)
            return nil
        }
        let total = end.upperBound - view.startIndex + length
        guard parts.count >= 2, buffer.readableBytes >= total else { return nil }
        let key = fields.first { $0.count == 2 && $0[0].lowercased() == "idempotency-key" }.map { $0[1].trimmingCharacters(in: .whitespaces) }
        let webSocketKey = fields.first { $0.count == 2 && $0[0].lowercased() == "sec-websocket-key" }.map { $0[1].trimmingCharacters(in: .whitespaces) }
        return (String(parts[1]), key, webSocketKey, total)
    }

    func write(_ text: String) {
        channel.writeAndFlush(ByteBuffer(string: text), promise: nil)
    }

    func write(_ bytes: [UInt8]) {
        channel.writeAndFlush(ByteBuffer(bytes: bytes), promise: nil)
    }

    func closeAfter(_ text: String) {
        done = true
        let channel = channel
        channel.writeAndFlush(ByteBuffer(string: text)).whenComplete { _ in channel.close(promise: nil) }
    }

    private func respond(_ status: String, _ headers: [String] = [], body: String = MisbehavingServer.okBody) {
        let fields = (headers + ["Content-Length: \(body.utf8.count)", "Content-Type: application/json"]).joined(separator: "\r\n")
        write("HTTP/1.1 \(status)\r\n\(fields)\r\n\r\n\(body)")
    }

    private func answer(_ target: String, idempotencyKey: String?) {
        let components = URLComponents(string: target)
        let name = components?.path.split(separator: "/").first.map(String.init) ?? ""
        guard let fault = MisbehavingServer.Fault(rawValue: name) else {
            return respond("404 Not Found", body: #"{"error":"no such fault"}"#)
        }
        switch fault {
        case .ok:
            respond("200 OK")
        case .forgedConnection:
            let forged = MisbehavingServer.forgedConnectionField
            respond("200 OK", ["catena-connection: \(forged)", "Catena-Connection: \(forged)"])
        case .cutAfterApply:
            let tag = components?.queryItems?.first { $0.name == "tag" }?.value ?? ""
            // A key seen before gets its stored answer, nothing applied again.
            guard counters.apply(idempotencyKey ?? "tag:" + tag, once: idempotencyKey != nil) else { return respond("200 OK") }
            done = true
            channel.close(promise: nil)
        case .slowTail:
            let query = components?.queryItems ?? []
            let every = query.first { $0.name == "every" }?.value.flatMap(Int.init).map { min(max(1, $0), 1_000_000) } ?? 100
            let delay = query.first { $0.name == "ms" }?.value.flatMap(Int64.init).map { min(max(0, $0), 10_000) } ?? 1000
            let number = counters.tail.wrappingAdd(1, ordering: .relaxed).newValue
            guard number % every == 0 else { return respond("200 OK", body: #"{"slow":false}"#) }
            let channel = channel
            channel.eventLoop.scheduleTask(in: .milliseconds(delay)) {
                let body = #"{"slow":true}"#
                channel.writeAndFlush(
                    ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: \(body.utf8.count)\r\nContent-Type: application/json\r\n\r\n\(body)"),
                    promise: nil)
            }
        case .hostileRateLimit:
            respond(
                "429 Too Many Requests",
                [
                    "Retry-After: 99999999999999999999",
                    #"RateLimit: "x";r=-1;t=99999999999999999, "y";r=0;t=1e400, garbage=("#,
                    #"RateLimit-Policy: "x";q=0;w=0, "z";q=-5;w=99999999999999"#,
                    "X-RateLimit-Remaining: -5",
                    "X-RateLimit-Reset: 1e308",
                    "X-RateLimit-Limit: 99999999999999999999999999",
                ], body: #"{"error":"slow down"}"#)
        case .hostileProblem:
            let title = #"Out of \u001b[31mcredit\u001b[0m\n\rFAKE: log line\u202etxt.exe"#  // JSON escapes: the decoded title holds them
            let nested = String(repeating: "[", count: 200) + String(repeating: "]", count: 200)
            let body =
                #"{"type":42,"title":""# + title + #"","status":"oops","detail":""# + String(repeating: "d", count: 100_000)
                + #"","instance":null,"deep":"# + nested + "}"
            let head = "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/problem+json\r\nContent-Length: \(body.utf8.count)\r\n\r\n"
            write(head + body)
        case .truncated:
            closeAfter("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + String(repeating: "x", count: 100))
        case .reset:
            done = true
            let channel = channel
            write("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + String(repeating: "x", count: 100))
            channel.eventLoop.scheduleTask(in: .milliseconds(20)) {
                // SO_LINGER with a zero timeout turns the close into a reset.
                guard let provider = channel as? any SocketOptionProvider else { return channel.close(promise: nil) }
                provider.setSoLinger(linger(l_onoff: 1, l_linger: 0)).whenComplete { _ in channel.close(promise: nil) }
            }
        case .closeEarly:
            done = true
            channel.close(promise: nil)
        case .garbage:
            closeAfter("HELLO THERE, THIS IS NOT HTTP\r\nREALLY NOT\r\n\r\n{}")
        case .silence:
            done = true
        case .slowHead:
            done = true
            write("HTTP/1.1 200 OK\r\n")
            Self.trickle(channel, byte: UInt8(ascii: "a"), prefix: "X-Slow: ", every: .milliseconds(100))
        case .slowBody:
            done = true
            write("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
            Self.trickle(channel, byte: UInt8(ascii: "b"), prefix: "", every: .milliseconds(100))
        case .hugeHead:
            closeAfter("HTTP/1.1 200 OK\r\nX-Huge: " + String(repeating: "h", count: 2 << 20) + "\r\nContent-Length: 2\r\n\r\n{}")
        case .badChunked:
            closeAfter("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n")
        case .badGzip:
            let body: [UInt8] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3] + Array("this is not deflate at all".utf8) + [1, 2, 3, 4, 5, 6, 7, 8]
            write("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Type: application/json\r\nContent-Length: \(body.count)\r\n\r\n")
            write(body)
        case .gzip, .identityGzip:
            let body = Gzip.stored(Array(MisbehavingServer.okBody.utf8))
            let coding = fault == .gzip ? "gzip" : "identity, gzip"
            write("HTTP/1.1 200 OK\r\nContent-Encoding: \(coding)\r\nContent-Type: application/json\r\nContent-Length: \(body.count)\r\n\r\n")
            write(body)
        case .gzipBomb, .hugeGzipBomb, .largeGzipBomb:
            done = true
            let body = fault == .gzipBomb ? Gzip.bomb : fault == .largeGzipBomb ? Gzip.largeBomb : Gzip.hugeBomb
            write("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Type: application/json\r\nContent-Length: \(body.count)\r\n\r\n")
            write(body)
        case .brotli, .layeredCoding:
            // A brotli stream's first bytes; what follows would be the compressed data.
            let body: [UInt8] = [0x1b, 0x2a, 0x00, 0x00] + Array("not for the caller to read".utf8)
            let coding = fault == .brotli ? "br" : "gzip, br"
            write("HTTP/1.1 200 OK\r\nContent-Encoding: \(coding)\r\nContent-Type: application/json\r\nContent-Length: \(body.count)\r\n\r\n")
            write(body)
        case .twoLengths:
            closeAfter("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 3\r\n\r\nhello")
        case .endless:
            done = true
            write("HTTP/1.1 200 OK\r\nContent-Length: 1099511627776\r\n\r\n")
            Self.stream(channel)
        case .redirectLoop:
            write("HTTP/1.1 302 Found\r\nLocation: /redirect-loop\r\nContent-Length: 0\r\n\r\n")
        case .interim:
            write("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n")
            respond("200 OK")
        case .interimLength, .chunkedWithLength:
            done = true
            let body = Array(MisbehavingServer.okBody.utf8)
            let length = "Content-Length: 4\r\n"
            write("HTTP/1.1 103 Early Hints\r\n\(fault == .interimLength ? length : "")\r\n")
            write("HTTP/1.1 200 OK\r\n\(fault == .chunkedWithLength ? length : "")Transfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n")
            write("4\r\n" + String(decoding: body[..<4], as: UTF8.self) + "\r\n")
            let rest = String(decoding: body[4...], as: UTF8.self)
            let channel = channel
            channel.eventLoop.scheduleTask(in: .milliseconds(50)) {
                channel.writeAndFlush(ByteBuffer(string: String(rest.utf8.count, radix: 16) + "\r\n" + rest + "\r\n0\r\n\r\n")).whenComplete { _ in
                    channel.close(promise: nil)
                }
            }
        case .tinyChunks:
            let size = components?.queryItems?.first { $0.name == "size" }?.value.flatMap(Int.init).map { min(max($0, 0), 16 << 20) }
            let body = size.map { (0..<$0).map(MisbehavingServer.tinyChunkByte(at:)) } ?? Array(MisbehavingServer.okBody.utf8)
            var wire = ByteBuffer(string: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n")
            wire.reserveCapacity(minimumWritableBytes: body.count * 6 + 5)
            for byte in body {
                wire.writeInteger(UInt32(0x310D_0A00) | UInt32(byte))  // "1\r\n" and the byte, big-endian
                wire.writeInteger(UInt16(0x0D0A))
            }
            wire.writeString("0\r\n\r\n")
            channel.writeAndFlush(wire, promise: nil)
        case .noContentWithBody:
            write("HTTP/1.1 204 No Content\r\n\r\nthese bytes do not belong here")
        case .basicChallenge:
            respond("401 Unauthorized", [#"WWW-Authenticate: Basic realm="misbehaving""#])
        case .digestChallenge:
            respond("401 Unauthorized", [#"WWW-Authenticate: Digest realm="misbehaving", qop="auth", nonce="4a5b6c", opaque="00ff""#])
        case .negotiateChallenge:
            respond("401 Unauthorized", ["WWW-Authenticate: Negotiate"])
        case .bearerChallenge:
            respond("401 Unauthorized", [#"WWW-Authenticate: Bearer realm="misbehaving", error="invalid_token""#])
        case .multipleChallenges:
            respond(
                "401 Unauthorized",
                [
                    "WWW-Authenticate: Negotiate", #"WWW-Authenticate: Digest realm="m", nonce="1""#,
                    #"WWW-Authenticate: Basic realm="m""#,
                ])
        case .proxyChallenge:
            respond("407 Proxy Authentication Required", [#"Proxy-Authenticate: Basic realm="proxy""#])
        case .redirect:
            let items = components?.queryItems ?? []
            let status = items.first { $0.name == "status" }?.value ?? "302"
            let location = items.first { $0.name == "to" }?.value ?? "/ok"
            // An empty `to` sends the redirect without a Location.
            let field = location.isEmpty ? "" : "Location: \(location)\r\n"
            if let coding = items.first(where: { $0.name == "coding" })?.value {
                let body: [UInt8] = [0x1b, 0x2a, 0x00, 0x00] + Array("moved".utf8)
                write("HTTP/1.1 \(status) Redirect\r\n\(field)Content-Encoding: \(coding)\r\nContent-Length: \(body.count)\r\n\r\n")
                write(body)
            } else {
                write("HTTP/1.1 \(status) Redirect\r\n\(field)Content-Length: 0\r\n\r\n")
            }
        }
    }

    /// Writes `prefix`, then `byte` every `interval` until the connection closes (or
    /// a minute has passed).
    private static func trickle(_ channel: any Channel, byte: UInt8, prefix: String, every interval: TimeAmount, left: Int = 600) {
        if !prefix.isEmpty { channel.writeAndFlush(ByteBuffer(string: prefix), promise: nil) }
        channel.eventLoop.scheduleTask(in: interval) {
            guard channel.isActive else { return }
            guard left > 0 else { return channel.close(promise: nil) }
            channel.writeAndFlush(ByteBuffer(bytes: [byte])).whenSuccess {
                trickle(channel, byte: byte, prefix: "", every: interval, left: left - 1)
            }
        }
    }

    /// Streams zeros 64 KiB at a time, as fast as the client reads, until it leaves
    /// (or 256 MiB have gone). Each write waits for the one before and goes back to the
    /// event loop's queue, so the other connections on the loop are served meanwhile.
    private static func stream(_ channel: any Channel, left: Int = 4096) {
        guard channel.isActive else { return }
        guard left > 0 else { return channel.close(promise: nil) }
        channel.writeAndFlush(ByteBuffer(repeating: 0, count: 64 * 1024)).whenSuccess {
            channel.eventLoop.execute { stream(channel, left: left - 1) }
        }
    }
}
#endif  // DemoServer
