#if AsyncHTTPClient
import CZlib
import Catena
import Foundation

/// permessage-deflate (RFC 7692) over the system's zlib: raw DEFLATE streams, one to
/// inflate the server's messages and one to deflate Catena's, each kept between
/// messages unless the agreement says otherwise.
final class ZlibMessageCodec: WebSocketMessageCodec, @unchecked Sendable {
    // @unchecked Sendable: each z_stream is touched only with its own lock held (zlib's
    // streams are not thread-safe), and lives at one address until deinit (zlib's state
    // points back to it).
    private let inflater = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
    private let deflater = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
    private let inflating = PthreadLock()
    private let deflating = PthreadLock()
    private let agreed: PerMessageDeflate
    /// Output is made this many bytes at a time.
    private static let chunk = 16 * 1024

    init(_ agreed: PerMessageDeflate) throws(WebSocketTransportError) {
        self.agreed = agreed
        inflater.initialize(to: z_stream())
        deflater.initialize(to: z_stream())
        // A raw stream (negative bits) with the largest window inflates any smaller one.
        let inflateStatus = inflateInit2_(inflater, -15, zlibVersion(), Int32(MemoryLayout<z_stream>.size))
        // zlib makes no raw stream with an 8-bit window (it would write 9): a server that
        // asks for 8 is refused rather than sent what it cannot read.
        let deflateStatus =
            agreed.clientMaxWindowBits < 9
            ? Z_STREAM_ERROR
            : deflateInit2_(
                deflater, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -Int32(agreed.clientMaxWindowBits), 8, Z_DEFAULT_STRATEGY, zlibVersion(),
                Int32(MemoryLayout<z_stream>.size))
        if inflateStatus == Z_OK { initialized.inflate = true }
        if deflateStatus == Z_OK { initialized.deflate = true }
        // On failure deinit runs (every property is set) and frees what was made.
        guard inflateStatus == Z_OK, deflateStatus == Z_OK else {
            throw WebSocketTransportError(
                agreed.clientMaxWindowBits < 9
                    ? "the server asks for client_max_window_bits=8, which zlib cannot compress with"
                    : "zlib could not start (\(inflateStatus), \(deflateStatus))")
        }
    }

    private var initialized = (inflate: false, deflate: false)

    deinit {
        if initialized.inflate { inflateEnd(inflater) }
        if initialized.deflate { deflateEnd(deflater) }
        inflater.deinitialize(count: 1)
        deflater.deinitialize(count: 1)
        inflater.deallocate()
        deflater.deallocate()
        inflating.destroy()
        deflating.destroy()
    }

    func inflate(_ payload: Data, limit: Int) throws(WebSocketInflateError) -> Data {
        let result: Result<Data, WebSocketInflateError> = inflating.withLock {
            // RFC 7692 section 7.2.2: the sender stripped the empty block's tail.
            var input = payload
            input.append(contentsOf: [0x00, 0x00, 0xFF, 0xFF])
            defer { if agreed.serverNoContextTakeover { inflateReset(inflater) } }
            return input.withUnsafeMutableBytes { (bytes: UnsafeMutableRawBufferPointer) -> Result<Data, WebSocketInflateError> in
                let stream = inflater
                stream.pointee.next_in = bytes.bindMemory(to: Bytef.self).baseAddress
                stream.pointee.avail_in = uInt(bytes.count)
                defer {
                    stream.pointee.next_in = nil
                    stream.pointee.avail_in = 0
                }
                var output = Data()
                var buffer = [Bytef](repeating: 0, count: Self.chunk)
                while true {
                    let (status, produced) = buffer.withUnsafeMutableBufferPointer { out -> (Int32, Int) in
                        stream.pointee.next_out = out.baseAddress
                        stream.pointee.avail_out = uInt(out.count)
                        let status = CZlib.inflate(stream, Z_SYNC_FLUSH)
                        return (status, out.count - Int(stream.pointee.avail_out))
                    }
                    guard produced <= limit - output.count else { return .failure(.tooBig) }
                    output.append(contentsOf: buffer[0..<produced])
                    switch status {
                    case Z_OK:
                        // More to come while input is left or the output was full.
                        if stream.pointee.avail_in == 0, produced < Self.chunk { return .success(output) }
                    case Z_STREAM_END:
                        // The message ended its stream (a final block): the next one starts anew.
                        inflateReset(stream)
                        return .success(output)
                    case Z_BUF_ERROR where stream.pointee.avail_in == 0:
                        return .success(output)
                    default:
                        let message = stream.pointee.msg.map { String(cString: $0) } ?? "status \(status)"
                        inflateReset(stream)
                        return .failure(.corrupt(message))
                    }
                }
            }
        }
        return try result.get()
    }

    func deflate(_ message: Data) -> Data {
        deflating.withLock {
            var input = message
            defer { if agreed.clientNoContextTakeover { deflateReset(deflater) } }
            let stream = deflater
            var output = input.withUnsafeMutableBytes { (bytes: UnsafeMutableRawBufferPointer) -> Data in
                stream.pointee.next_in = bytes.bindMemory(to: Bytef.self).baseAddress
                stream.pointee.avail_in = uInt(bytes.count)
                defer {
                    stream.pointee.next_in = nil
                    stream.pointee.avail_in = 0
                }
                var output = Data()
                var buffer = [Bytef](repeating: 0, count: Self.chunk)
                // A sync flush ends on a byte boundary with an empty stored block; the
                // output is whole once a flush leaves room in the buffer.
                while true {
                    let produced = buffer.withUnsafeMutableBufferPointer { out -> Int in
                        stream.pointee.next_out = out.baseAddress
                        stream.pointee.avail_out = uInt(out.count)
                        _ = CZlib.deflate(stream, Z_SYNC_FLUSH)
                        return out.count - Int(stream.pointee.avail_out)
                    }
                    output.append(contentsOf: buffer[0..<produced])
                    if produced < Self.chunk { return output }
                }
            }
            // RFC 7692 section 7.2.1: the empty block's 0x00 0x00 0xFF 0xFF is left off.
            if output.count >= 4, output.suffix(4) == Data([0x00, 0x00, 0xFF, 0xFF]) { output.removeLast(4) }
            // An empty message right after a flush makes zlib write nothing; section
            // 7.2.3.6's single 0x00 carries the bits the stripped tail needs before it.
            return output.isEmpty ? Data([0x00]) : output
        }
    }
}
#endif  // AsyncHTTPClient
