#if DemoServer
import Catena
public import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// A server that misbehaves on purpose, one fault per path, so tests can prove that a
/// transport survives what real servers and middleboxes send: truncated and reset
/// bodies, garbage for a status line, silence, slow or oversized heads, broken chunked
/// or compressed encodings, conflicting lengths, redirect loops, interim responses,
/// bodies where none belong, and every kind of authentication challenge.
///
/// It speaks raw bytes over TCP (SwiftNIO, no HTTP library), so nothing between it and
/// the client can tidy its answers up. Paths are listed in ``Fault``.
public final class MisbehavingServer: Sendable {
    /// The port it listens on.
    public let port: Int
    /// `http://127.0.0.1:port`.
    public let baseURL: URL
    private let channel: any Channel
    private let counters: Counters

    /// Every path the server answers, and what it does there.
    public enum Fault: String, CaseIterable, Sendable {
        /// A well-formed 200 with a small JSON body (keep-alive).
        case ok
        /// Declares 1,000 bytes, sends 100, closes.
        case truncated
        /// Declares 1,000 bytes, sends 100, resets the connection (RST).
        case reset
        /// Closes the connection without a byte.
        case closeEarly = "close-early"
        /// Text that is not HTTP where the status line belongs.
        case garbage
        /// Reads the request and never answers.
        case silence
        /// Sends a header byte every 100 ms, forever.
        case slowHead = "slow-head"
        /// Sends its body a byte every 100 ms.
        case slowBody = "slow-body"
        /// A 2 MiB header field.
        case hugeHead = "huge-head"
        /// A chunked body whose chunk size is not a number.
        case badChunked = "bad-chunked"
        /// `Content-Encoding: gzip` over bytes that are not gzip.
        case badGzip = "bad-gzip"
        /// A valid gzip body (``okBody`` compressed).
        case gzip
        /// A gzip body of 53 KB that inflates to 8 MiB of zeros.
        case gzipBomb = "gzip-bomb"
        /// A gzip body of 2 MiB that inflates to 2 GiB of zeros: deflate's densest
        /// ratio, about 1,000 to 1, as zlib makes it of a long run of one byte.
        case hugeGzipBomb = "gzip-bomb-2g"
        /// A gzip body of 512 KiB that inflates to 512 MiB of zeros, made as
        /// ``hugeGzipBomb`` is: a quarter of its cost, for tests that run beside others.
        case largeGzipBomb = "gzip-bomb-512m"
        /// `Content-Encoding: br` whatever the request asked for (as httpbin's /brotli
        /// does), over bytes no client here decodes.
        case brotli
        /// `Content-Encoding: gzip, br`: gzip, then brotli over it.
        case layeredCoding = "gzip-br"
        /// `Content-Encoding: identity, gzip` over a valid gzip body (``okBody``): a
        /// decoder that reads only the first member decodes nothing.
        case identityGzip = "identity-gzip"
        /// Two `Content-Length` fields that disagree (5 and 3).
        case twoLengths = "two-lengths"
        /// Declares a 1 TiB body and streams zeros until the client leaves.
        case endless
        /// A 302 to itself.
        case redirectLoop = "redirect-loop"
        /// `100 Continue` and `103 Early Hints` before a 200.
        case interim
        /// A `103 Early Hints` that carries `Content-Length: 4`, then a 200 whose chunked
        /// body (``okBody``) comes in two writes 50 ms apart, the first 4 bytes long: a
        /// client that keeps the interim head's length cuts the body there.
        case interimLength = "interim-length"
        /// A 200 with both `Content-Length: 4` and chunked framing, whose chunked body
        /// (``okBody``) comes as in ``interimLength``: a sign of response splitting that a
        /// client ought to treat as an error (RFC 9112, section 6.3); one that took the
        /// length would cut the body.
        case chunkedWithLength = "chunked-with-length"
        /// A 204 followed by body bytes (which break the next response on a reused connection).
        case noContentWithBody = "no-content-with-body"
        /// A 401 with `WWW-Authenticate: Basic`.
        case basicChallenge = "challenge-basic"
        /// A 401 with `WWW-Authenticate: Digest`.
        case digestChallenge = "challenge-digest"
        /// A 401 with `WWW-Authenticate: Negotiate`.
        case negotiateChallenge = "challenge-negotiate"
        /// A 401 with `WWW-Authenticate: Bearer`.
        case bearerChallenge = "challenge-bearer"
        /// A 401 with three challenges in three fields.
        case multipleChallenges = "challenge-multiple"
        /// A 407 with `Proxy-Authenticate: Basic`.
        case proxyChallenge = "challenge-proxy"
        /// `/redirect?status=N&to=URL`: a redirect with that status to that URL (no
        /// Location when `to` is empty); with `coding=br`, a body in that coding.
        case redirect
        /// A chunked 200 whose body comes one byte per chunk, all in one write: six bytes
        /// of framing for each byte of body. The body is ``okBody``, or with `?size=N`
        /// (up to 16 MiB) N bytes of ``tinyChunkByte(at:)``.
        case tinyChunks = "tiny-chunks"
        /// Applies the request, then closes the connection without an answer: the
        /// effect happened and the client cannot know. With an `Idempotency-Key` it does
        /// so only the first time; the key again gets ``okBody``, applied no more. Without
        /// one, every request is applied (counted under `?tag=`). See
        /// ``MisbehavingServer/applied(_:)``.
        case cutAfterApply = "cut-after-apply"
    }

    /// The body of ``Fault/ok`` and ``Fault/gzip``, and of each challenge.
    public static let okBody = #"{"ok":true,"server":"misbehaving"}"#

    /// Byte `index` of a sized ``Fault/tinyChunks`` body.
    public static func tinyChunkByte(at index: Int) -> UInt8 {
        UInt8(truncatingIfNeeded: index &* 31 &+ index >> 8)
    }

    private init(port: Int, channel: any Channel, counters: Counters) {
        self.port = port
        self.baseURL = URL(string: "http://127.0.0.1:\(port)")!
        self.channel = channel
        self.counters = counters
    }

    /// How many times ``Fault/cutAfterApply`` applied requests with this
    /// `Idempotency-Key` (as sent, quotes included) or, for requests without one, this
    /// `tag` (`"tag:NAME"`).
    public func applied(_ identity: String) -> Int {
        counters.applied(identity)
    }

    /// Starts a server on 127.0.0.1 with a port the system picks.
    public static func start() async throws -> MisbehavingServer {
        let counters = Counters()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                counters.accepted()
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(FaultHandler(channel: channel, counters: counters))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return MisbehavingServer(port: channel.localAddress?.port ?? 0, channel: channel, counters: counters)
    }

    /// The URL of a fault.
    public func url(_ fault: Fault) -> URL {
        baseURL.appendingPathComponent(fault.rawValue)
    }

    /// How many connections the server has accepted.
    public var connectionsAccepted: Int { counters.count }

    /// Stops listening; connections still open are closed as their clients leave.
    public func stop() async {
        try? await channel.close()
    }
}

/// Counts accepted connections, and requests applied by ``MisbehavingServer/Fault/cutAfterApply``.
private final class Counters: Sendable {
    private let value = Atomic<Int>(0)
    private let appliedCounts = Locked<[String: Int]>([:])
    func accepted() { value.add(1, ordering: .relaxed) }
    var count: Int { value.load(ordering: .relaxed) }

    /// Applies a request with this identity; with `once`, only if none was before.
    /// Returns whether it was applied.
    func apply(_ identity: String, once: Bool) -> Bool {
        appliedCounts.withLock { counts in
            if once, counts[identity] != nil { return false }
            counts[identity, default: 0] += 1
            return true
        }
    }

    func applied(_ identity: String) -> Int {
        appliedCounts.withLock { $0[identity] ?? 0 }
    }
}

/// Reads one request head (and its declared body) at a time and answers with the fault
/// its path names.
private final class FaultHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    private let channel: any Channel
    private let counters: Counters
    private var buffer = ByteBuffer()
    /// Once a fault has taken over the connection, nothing more is read.
    private var done = false

    init(channel: any Channel, counters: Counters) {
        self.channel = channel
        self.counters = counters
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !done else { return }  // a fault owns the connection: input is dropped
        var incoming = unwrapInboundIn(data)
        buffer.writeBuffer(&incoming)
        while !done, let (target, key, consumed) = nextRequest() {
            buffer.moveReaderIndex(forwardBy: consumed)
            buffer.discardReadBytes()
            answer(target, idempotencyKey: key)
        }
    }

    /// The request target, its `Idempotency-Key`, and the bytes the request takes, once
    /// it is all here.
    private func nextRequest() -> (String, String?, Int)? {
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
        return (String(parts[1]), key, total)
    }

    private func write(_ text: String) {
        channel.writeAndFlush(ByteBuffer(string: text), promise: nil)
    }

    private func write(_ bytes: [UInt8]) {
        channel.writeAndFlush(ByteBuffer(bytes: bytes), promise: nil)
    }

    private func closeAfter(_ text: String) {
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
        case .cutAfterApply:
            let tag = components?.queryItems?.first { $0.name == "tag" }?.value ?? ""
            // A key seen before gets its stored answer, nothing applied again.
            guard counters.apply(idempotencyKey ?? "tag:" + tag, once: idempotencyKey != nil) else { return respond("200 OK") }
            done = true
            channel.close(promise: nil)
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

/// Just enough gzip for the faults: stored (uncompressed) blocks, and a bomb.
enum Gzip {
    /// 53 KB that inflate to 8 MiB, made once.
    static let bomb = zeroBomb(inflatedSize: 8 << 20)

    /// 2 MiB that inflate to 2 GiB, made once.
    static let hugeBomb = denseZeroBomb(copies: (1 << 31) / 258)

    /// 512 KiB that inflate to 512 MiB, made once.
    static let largeBomb = denseZeroBomb(copies: (1 << 29) / 258)

    private static let header: [UInt8] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3]

    /// `data` as a valid gzip member made of stored deflate blocks.
    static func stored(_ data: [UInt8]) -> [UInt8] {
        var out = header
        var start = 0
        repeat {
            let end = min(start + 65_535, data.count)
            let length = UInt16(end - start)
            out.append(end == data.count ? 1 : 0)
            out += [UInt8(length & 0xff), UInt8(length >> 8), UInt8(~length & 0xff), UInt8(~length >> 8)]
            out += data[start..<end]
            start = end
        } while start < data.count
        return out + littleEndian(crc32(data)) + littleEndian(UInt32(truncatingIfNeeded: data.count))
    }

    /// A gzip member that inflates to `inflatedSize` zeros (rounded to 2,064-byte
    /// steps): one literal zero, then copies of 258 bytes at distance 1, 13 bits each
    /// with the fixed Huffman code. Its checksum is left zero: the body exists to be
    /// refused before its end.
    static func zeroBomb(inflatedSize: Int) -> [UInt8] {
        // From bit 16 on, eight copies (104 bits) are 13 whole bytes that repeat: write
        // eight and sixteen copies bit by bit, then splice in as many periods as needed.
        func member(copies: Int) -> [UInt8] {
            var bits = BitWriter()
            bits.write(1, count: 1)  // last block
            bits.write(1, count: 2)  // fixed Huffman codes
            bits.writeCode(0b0011_0000, length: 8)  // literal 0
            for _ in 0..<copies {
                bits.writeCode(0b1100_0101, length: 8)  // length 258 (symbol 285)
                bits.writeCode(0, length: 5)  // distance 1
            }
            bits.writeCode(0, length: 7)  // end of block (symbol 256)
            return bits.finished
        }
        let eight = member(copies: 8)
        let period = member(copies: 16)[2..<15]
        let periods = max(1, (inflatedSize - 1) / (258 * 8))
        var deflate = Array(eight[0..<2])
        deflate.reserveCapacity(periods * 13 + 16)
        for _ in 1..<periods { deflate += period }
        deflate += eight[2...]
        let inflated = 1 + 258 * 8 * periods
        return header + deflate + [0, 0, 0, 0] + littleEndian(UInt32(truncatingIfNeeded: inflated))
    }

    /// A gzip member that inflates to `1 + 258 * copies` zeros at two bits a copy: one
    /// dynamic Huffman block whose only codes are literal 0 (`10`), end of block (`11`),
    /// length 258 (`0`) and distance 1 (`0`), so that after the header every copy is
    /// two zero bits and the body is almost all zero bytes. Checksum left zero.
    static func denseZeroBomb(copies: Int) -> [UInt8] {
        var bits = BitWriter()
        bits.write(1, count: 1)  // last block
        bits.write(2, count: 2)  // dynamic Huffman codes
        bits.write(286 - 257, count: 5)  // HLIT: literal/length codes up to 285
        bits.write(0, count: 5)  // HDIST: one distance code
        bits.write(18 - 4, count: 4)  // HCLEN: code length codes in order up to 1
        // Code length code lengths, in the format's order 16, 17, 18, 0, 8, 7, 9, 6, 10,
        // 5, 11, 4, 12, 3, 13, 2, 14, 1: symbol 18 gets 1 bit, symbols 2 and 1 get 2.
        for length in [0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 2] { bits.write(length, count: 3) }
        // Canonical codes: 18 is `0`, 1 is `10`, 2 is `11`.
        func zeros(_ count: Int) {
            bits.writeCode(0, length: 1)  // 18: a run of 11 to 138 zeros
            bits.write(count - 11, count: 7)
        }
        bits.writeCode(0b11, length: 2)  // literal 0: length 2
        zeros(138)
        zeros(117)  // literals 1 to 255 unused
        bits.writeCode(0b11, length: 2)  // end of block: length 2
        zeros(28)  // lengths 257 to 284 unused
        bits.writeCode(0b10, length: 2)  // length 258 (symbol 285): length 1
        bits.writeCode(0b10, length: 2)  // distance 1: length 1
        bits.writeCode(0b10, length: 2)  // the data: one literal 0
        // The copies: two zero bits each, as whole zero bytes once aligned.
        var zeroBits = 2 * copies
        while zeroBits > 0, !bits.isAligned {
            bits.write(0, count: 1)
            zeroBits -= 1
        }
        bits.appendZeroBytes(zeroBits / 8)
        bits.write(0, count: zeroBits % 8)
        bits.writeCode(0b11, length: 2)  // end of block
        let inflated = 1 + 258 * copies
        return header + bits.finished + [0, 0, 0, 0] + littleEndian(UInt32(truncatingIfNeeded: inflated))
    }

    private static func littleEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value & 0xff), UInt8((value >> 8) & 0xff), UInt8((value >> 16) & 0xff), UInt8(value >> 24)]
    }

    static func crc32(_ data: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xffff_ffff
        for byte in data {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xedb8_8320 : crc >> 1 }
        }
        return ~crc
    }

    /// Deflate's bit order: values least significant bit first, Huffman codes most
    /// significant bit first.
    private struct BitWriter {
        var bytes: [UInt8] = []
        private var current: UInt8 = 0
        private var used = 0

        mutating func write(_ value: Int, count: Int) {
            for index in 0..<count { push((value >> index) & 1) }
        }

        mutating func writeCode(_ code: Int, length: Int) {
            for index in stride(from: length - 1, through: 0, by: -1) { push((code >> index) & 1) }
        }

        private mutating func push(_ bit: Int) {
            current |= UInt8(bit) << used
            used += 1
            if used == 8 { bytes.append(current); current = 0; used = 0 }
        }

        var isAligned: Bool { used == 0 }

        mutating func appendZeroBytes(_ count: Int) {
            bytes.append(contentsOf: repeatElement(0, count: count))
        }

        var finished: [UInt8] { used > 0 ? bytes + [current] : bytes }
    }
}
#endif  // DemoServer
