#if DemoServer
import CompressNIO
import Hummingbird
import NIOCore

/// Compresses JSON and text bodies of 1 KiB to 1 MiB with gzip or deflate when the
/// client asks for it (`Accept-Encoding`), as real servers do, and says so with
/// `Content-Encoding` and `Vary: Accept-Encoding`. Bodies of unknown length, already
/// encoded ones and everything else pass through untouched.
///
/// Not swift-nio-extras' `HTTPResponseCompressor`: it traps when one request gets two
/// response heads (an interim `100 Continue` and the final one, as curl's large uploads
/// cause), which brought a test process down.
struct CompressionMiddleware<Context: RequestContext>: RouterMiddleware {
    static var minimumSize: Int { 1024 }
    static var maximumSize: Int { 1 << 20 }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response = try await next(request, context)
        guard request.method != .head, response.status == .ok,
            let encoding = request.headers[.acceptEncoding].flatMap(Self.choose),
            response.headers[.contentEncoding] == nil,
            let type = response.headers[.contentType], type.hasPrefix("application/json") || type.hasPrefix("text/"),
            let length = response.headers[.contentLength].flatMap({ Int($0) }),
            (Self.minimumSize...Self.maximumSize).contains(length)
        else { return response }
        let collected = Collected()
        try await response.body.write(Collector(into: collected))
        var body = collected.buffer
        guard body.readableBytes <= Self.maximumSize else { throw HTTPError(.internalServerError) }
        let compressed = try body.compress(with: encoding == "gzip" ? .gzip() : .zlib())
        response.headers[.contentEncoding] = encoding
        response.headers[.contentLength] = String(compressed.readableBytes)
        response.headers[values: .vary].append("Accept-Encoding")
        // Another representation: its validator may match only weakly (RFC 9110, 8.8.3).
        if let etag = response.headers[.eTag], !etag.hasPrefix("W/") { response.headers[.eTag] = "W/" + etag }
        response.body = ResponseBody(byteBuffer: compressed)
        return response
    }

    /// gzip or deflate, whichever the client ranks higher (`q`, gzip on a tie); never
    /// one it refuses with `q=0`.
    static func choose(_ accepted: String) -> String? {
        var best: (name: String, quality: Double)?
        for item in accepted.split(separator: ",") {
            let parts = item.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard let name = parts.first, name == "gzip" || name == "deflate" else { continue }
            let quality = parts.dropFirst().first { $0.hasPrefix("q=") }.flatMap { Double($0.dropFirst(2)) } ?? 1
            guard quality > 0, quality.isFinite else { continue }
            if best == nil || quality > best!.quality || (quality == best!.quality && name == "gzip") { best = (name, quality) }
        }
        return best?.name
    }

    /// Where a ``Collector`` puts the body (the writer itself is consumed).
    private final class Collected {
        var buffer = ByteBuffer()
    }

    /// Gathers a body that is known to be small, within one request's task.
    private struct Collector: ResponseBodyWriter {
        let into: Collected
        mutating func write(_ buffer: ByteBuffer) async throws {
            var buffer = buffer
            into.buffer.writeBuffer(&buffer)
        }
        consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
    }
}
#endif  // DemoServer
