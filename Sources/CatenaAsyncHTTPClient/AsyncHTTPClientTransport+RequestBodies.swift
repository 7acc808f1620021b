#if AsyncHTTPClient
import AsyncHTTPClient
import Catena
import Foundation
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL
import Synchronization

/// Request bodies handed to AsyncHTTPClient: in-memory ones in pieces when progress is
/// watched, streamed ones counted as AsyncHTTPClient pulls them.
extension AsyncHTTPClientTransport {
    /// The size of the pieces an in-memory body is sent in when its progress is watched.
    static let progressChunkSize = 64 * 1024

    /// `data` in pieces of ``progressChunkSize`` (slices share its storage).
    static func chunks(of data: Data) -> AsyncThrowingStream<Data, any Error> {
        AsyncThrowingStream { continuation in
            var start = data.startIndex
            while start < data.endIndex {
                let end = data.index(start, offsetBy: progressChunkSize, limitedBy: data.endIndex) ?? data.endIndex
                continuation.yield(data[start..<end])
                start = end
            }
            continuation.finish()
        }
    }

    /// A streamed body, opened afresh for this attempt, counted as AsyncHTTPClient
    /// pulls its chunks (it pulls as it writes, so the count follows what was sent).
    static func streamedBody(
        _ stream: (length: Int64?, open: @Sendable () throws -> AsyncThrowingStream<Data, any Error>), request: APIRequest
    ) throws(CatenaError) -> HTTPClientRequest.Body {
        let chunks: AsyncThrowingStream<Data, any Error>
        do {
            chunks = try stream.open()
        } catch {
            throw CatenaError(.invalidRequest, request: request, underlyingError: error, detail: "the \(request.body.kind) body could not be opened")
        }
        if let length = stream.length { request.report(.bodySent(bytes: length)) }
        let report = request[option: UploadProgress.self]
        let sent = Atomic<Int64>(0)
        report?(TransferProgress(completed: 0, total: stream.length))
        let buffers = chunks.map { @Sendable chunk -> ByteBuffer in
            let total = sent.add(Int64(chunk.count), ordering: .relaxed).newValue
            report?(TransferProgress(completed: total, total: stream.length))
            return ByteBuffer(data: chunk)
        }
        return .stream(buffers, length: stream.length.map { .known($0) } ?? .unknown)
    }
}
#endif  // AsyncHTTPClient
