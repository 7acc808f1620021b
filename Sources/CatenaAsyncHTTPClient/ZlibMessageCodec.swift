#if AsyncHTTPClient
import CCatenaZlib
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
    private var initialized = (inflate: false, deflate: false)
    /// Output is made this many bytes at a time.
    private static let chunk = 16 * 1024
    /// Input is given to zlib at most this many bytes at a time (its counts are 32-bit).
    private static let slice = 1 << 30

    init(_ agreed: PerMessageDeflate) throws(WebSocketTransportError) {
        self.agreed = agreed
        inflater.initialize(to: z_stream())
        deflater.initialize(to: z_stream())
        // A raw stream (negative bits) with the largest window inflates any smaller one.
        let inflateStatus = inflateInit2_(inflater, -15, zlibVersion(), Int32(MemoryLayout<z_stream>.size))
        // zlib makes no raw stream with an 8-bit window (it would use 9): for a server
        // that asks for 8, Huffman coding alone, which refers back to nothing.
        let bits = Int32(max(agreed.clientMaxWindowBits, 9))
        let strategy = agreed.clientMaxWindowBits < 9 ? Z_HUFFMAN_ONLY : Z_DEFAULT_STRATEGY
        let deflateStatus = deflateInit2_(
            deflater, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -bits, 8, strategy, zlibVersion(), Int32(MemoryLayout<z_stream>.size))
        initialized = (inflateStatus == Z_OK, deflateStatus == Z_OK)
        // On failure deinit runs (every property is set) and frees what was made.
        guard inflateStatus == Z_OK, deflateStatus == Z_OK else {
            throw WebSocketTransportError("zlib could not start (\(inflateStatus), \(deflateStatus))")
        }
    }

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
            let result = input.withUnsafeMutableBytes { bytes in inflate(bytes, limit: limit) }
            if agreed.serverNoContextTakeover { inflateReset(inflater) }
            return result
        }
        return try result.get()
    }

    /// Inflates all of `input`, lock held: stops at the first chunk that passes `limit`.
    private func inflate(_ input: UnsafeMutableRawBufferPointer, limit: Int) -> Result<Data, WebSocketInflateError> {
        let stream = inflater
        defer {
            stream.pointee.next_in = nil
            stream.pointee.avail_in = 0
        }
        var offset = 0
        var output = Data()
        var buffer = [Bytef](repeating: 0, count: Self.chunk)
        while true {
            Self.feed(stream, from: input, offset: &offset)
            let (status, produced) = buffer.withUnsafeMutableBufferPointer { out -> (Int32, Int) in
                stream.pointee.next_out = out.baseAddress
                stream.pointee.avail_out = uInt(out.count)
                let status = CCatenaZlib.inflate(stream, Z_SYNC_FLUSH)
                return (status, out.count - Int(stream.pointee.avail_out))
            }
            guard produced <= limit - output.count else { return .failure(.tooBig) }
            output.append(contentsOf: buffer[0..<produced])
            let inputLeft = stream.pointee.avail_in > 0 || offset < input.count
            switch status {
            case Z_OK:
                // More to come while input is left or the output was full.
                guard !inputLeft, produced < Self.chunk else { continue }
                // All read: the tail's empty block must have left the stream between blocks
                // (zlib's data_type bit 128); else the message was cut short, and the next
                // would be read as its rest.
                guard stream.pointee.data_type & 128 != 0 else {
                    inflateReset(stream)
                    return .failure(.corrupt("the message ends inside a DEFLATE block"))
                }
                return .success(output)
            case Z_STREAM_END:
                // The message ended its stream with a final block (section 7.2.3): the next
                // starts a new stream, with this one's window unless the server resets it.
                restartKeepingWindow()
                return .success(output)
            case Z_BUF_ERROR where !inputLeft:
                return .success(output)
            default:
                let message = stream.pointee.msg.map { String(cString: $0) } ?? "status \(status)"
                inflateReset(stream)
                return .failure(.corrupt(message))
            }
        }
    }

    /// Resets the inflater for a new stream, and gives it the old one's window back.
    private func restartKeepingWindow() {
        guard !agreed.serverNoContextTakeover else {
            inflateReset(inflater)
            return
        }
        var window = [Bytef](repeating: 0, count: 1 << 15)
        var length: uInt = 0
        let got = window.withUnsafeMutableBufferPointer { inflateGetDictionary(inflater, $0.baseAddress, &length) }
        inflateReset(inflater)
        if got == Z_OK, length > 0 {
            _ = window.withUnsafeBufferPointer { inflateSetDictionary(inflater, $0.baseAddress, length) }
        }
    }

    func deflate<Sent>(_ message: Data, then send: (Data) -> Sent) -> Sent {
        deflating.withLock {
            // zlib's next_in is not const, but deflate never writes through it: no copy.
            var output = message.withUnsafeBytes { bytes in deflate(UnsafeMutableRawBufferPointer(mutating: bytes)) }
            if agreed.clientNoContextTakeover { deflateReset(deflater) }
            // RFC 7692 section 7.2.1: the empty block's 0x00 0x00 0xFF 0xFF is left off.
            if output.count >= 4, output.suffix(4) == Data([0x00, 0x00, 0xFF, 0xFF]) { output.removeLast(4) }
            // An empty message right after a flush makes zlib write nothing; section
            // 7.2.3.6's single 0x00 carries the bits the stripped tail needs before it.
            return send(output.isEmpty ? Data([0x00]) : output)
        }
    }

    /// Gives `stream` the next slice of `input` from `offset` once it has used the last.
    private static func feed(_ stream: UnsafeMutablePointer<z_stream>, from input: UnsafeMutableRawBufferPointer, offset: inout Int) {
        guard stream.pointee.avail_in == 0, offset < input.count else { return }
        let count = min(slice, input.count - offset)
        stream.pointee.next_in = input.baseAddress.map { $0.advanced(by: offset).assumingMemoryBound(to: Bytef.self) }
        stream.pointee.avail_in = uInt(count)
        offset += count
    }

    /// Deflates all of `input` and flushes to a byte boundary, lock held.
    private func deflate(_ input: UnsafeMutableRawBufferPointer) -> Data {
        let stream = deflater
        defer {
            stream.pointee.next_in = nil
            stream.pointee.avail_in = 0
        }
        var offset = 0
        var output = Data()
        var buffer = [Bytef](repeating: 0, count: Self.chunk)
        while true {
            Self.feed(stream, from: input, offset: &offset)
            // Only the last slice is flushed: a sync flush ends on a byte boundary with an
            // empty stored block, whole once a call leaves room in the buffer.
            let last = offset == input.count
            let (status, produced) = buffer.withUnsafeMutableBufferPointer { out -> (Int32, Int) in
                stream.pointee.next_out = out.baseAddress
                stream.pointee.avail_out = uInt(out.count)
                let status = CCatenaZlib.deflate(stream, last ? Z_SYNC_FLUSH : Z_NO_FLUSH)
                return (status, out.count - Int(stream.pointee.avail_out))
            }
            output.append(contentsOf: buffer[0..<produced])
            // Z_BUF_ERROR is a flush with nothing left to write; any other status but Z_OK
            // would repeat forever (zlib gives none for a stream set up as this one).
            guard status == Z_OK || status == Z_BUF_ERROR else { return output }
            if last, stream.pointee.avail_in == 0, produced < Self.chunk { return output }
        }
    }
}
#endif  // AsyncHTTPClient
