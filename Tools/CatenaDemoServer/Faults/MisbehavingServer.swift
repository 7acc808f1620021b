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
        /// A slow tail, for hedging: of the requests to this path, every `?every=N`th
        /// (default 100, counted across the server) is answered after `?ms=M` (default
        /// 1000, at most 10,000) with `{"slow":true}`; the others at once with
        /// `{"slow":false}`.
        case slowTail = "slow-tail"
        /// A 429 whose rate-limit fields are absurd: negative counts, resets of 10¹⁷
        /// seconds, a `Retry-After` of 10²⁰ seconds, malformed structured fields.
        case hostileRateLimit = "ratelimit-hostile"
        /// A 200 that names a connection it did not go over, in the field Catena's
        /// connection watch adds (``forgedConnectionField``), in two spellings.
        case forgedConnection = "forged-connection"
        /// A 500 `application/problem+json` body made to hurt: terminal escapes,
        /// newlines and a bidirectional override in its title, members of the wrong
        /// types, a 100 KB detail and an extension nested 200 deep.
        case hostileProblem = "problem-hostile"
    }

    /// The value ``Fault/forgedConnection`` sends: well formed, and false in every part.
    public static let forgedConnectionField = "1 0 0 2 TLSv1.3 192.0.2.66 1 2"

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
final class Counters: Sendable {
    private let value = Atomic<Int>(0)
    /// Requests to ``MisbehavingServer/Fault/slowTail`` so far.
    let tail = Atomic<Int>(0)
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
#endif  // DemoServer
