#if DemoServer
import Catena
import Foundation
import Hummingbird
import NIOCore
import HTTPTypes

/// Bodies that arrive over time: a model-like token stream as server-sent events and
/// a JSON Lines export.
enum StreamRoutes {
    static func add(to router: Router<DemoRoutes.Context>) {
        let api = router.group("api")
        let opened = Locked<Set<String>>([])

        // A body in two parts: `first`, then, once `POST /api/gated/open?key=` was
        // called (or after 60 s), `rest`. Proves without timing that a transport hands
        // over what has arrived before the server has sent the end.
        api.get("gated") { request, _ in
            guard let key = request.uri.queryParameters.get("key") else { return Response(status: .badRequest) }
            return Response(
                status: .ok, headers: [.contentType: "application/octet-stream"],
                body: .init { writer in
                    try await writer.write(ByteBuffer(string: "first"))
                    for _ in 0..<6_000 where !opened.withLock({ $0.contains(key) }) {
                        try await Task.sleep(for: .milliseconds(10))
                    }
                    try await writer.write(ByteBuffer(string: "rest"))
                    try await writer.finish(nil)
                })
        }
        // A body without end (4 GiB at most) of 64 KiB chunks, written as fast as the client
        // reads them; `GET /api/endless/stats?key=` says how many bytes went out, which
        // shows whether a client buffers what it does not read.
        let endless = Locked<(written: [String: Int], order: [String])>(([:], []))
        api.get("endless") { request, _ in
            guard let key = request.uri.queryParameters.get("key") else { return Response(status: .badRequest) }
            endless.withLock { state in
                state.written[key] = 0
                state.order.append(key)
                if state.order.count > 100 { state.written[state.order.removeFirst()] = nil }
            }
            return Response(
                status: .ok, headers: [.contentType: "application/octet-stream"],
                body: .init { writer in
                    let chunk = ByteBuffer(repeating: UInt8(ascii: "a"), count: 65_536)
                    for _ in 0..<65_536 {
                        try await writer.write(chunk)
                        endless.withLock { $0.written[key]? += chunk.readableBytes }
                    }
                    try await writer.finish(nil)
                })
        }
        api.get("endless/stats") { request, _ in
            let written = request.uri.queryParameters.get("key").flatMap { key in endless.withLock { $0.written[key] } } ?? -1
            return Response(
                status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: #"{"written":\#(written)}"#)))
        }
        api.post("gated/open") { request, _ in
            guard let key = request.uri.queryParameters.get("key") else { return Response(status: .badRequest) }
            opened.withLock { _ = $0.insert(key) }
            return Response(status: .noContent)
        }

        // `text/event-stream`: `retry: {retry_ms}`, then events `id: n`, `event: token`,
        // `data: token-n` for n from the one after `Last-Event-ID` (or 1) to `count`,
        // one every `interval` seconds. `drop_after` cuts the connection (no clean end)
        // after that many events of this connection, for reconnection tests. The
        // stream ends after the last event; `end=204` answers 204 to a reconnection
        // that has nothing left. `unavailable=N&key=K` answers the first N requests for
        // K with 503 and `Retry-After: 1`, as a restarting service does.
        let refusals = Locked<[String: Int]>([:])
        api.get("events") { request, _ in
            let query = request.uri.queryParameters
            let unavailable = try wholeNumber(query.get("unavailable"), named: "unavailable", in: 0...10, default: 0)
            if unavailable > 0 {
                guard let key = query.get("key") else { throw HTTPError(.badRequest, message: "unavailable needs a key") }
                let refuse = refusals.withLock { refused in
                    defer { refused[key, default: 0] += 1 }
                    return refused[key, default: 0] < unavailable
                }
                if refuse { return Response(status: .serviceUnavailable, headers: [.retryAfter: "1"]) }
            }
            let count = try wholeNumber(query.get("count"), named: "count", in: 0...100_000, default: 10)
            let interval = try number(query.get("interval"), named: "interval", in: 0...5, default: 0.05)
            let dropAfter = try wholeNumber(query.get("drop_after"), named: "drop_after", in: 0...100_000, default: 0)
            let retry = try wholeNumber(query.get("retry_ms"), named: "retry_ms", in: 0...60_000, default: 100)
            let after = request.headers[HTTPField.Name("Last-Event-ID")!].flatMap { Int($0) } ?? 0
            if after >= count, query.get("end") == "204" { return Response(status: .noContent) }
            return Response(
                status: .ok, headers: [.contentType: "text/event-stream", .cacheControl: "no-store"],
                body: .init { writer in
                    try await writer.write(ByteBuffer(string: "retry: \(retry)\n\n"))
                    var sent = 0
                    for n in (after + 1)..<max(after + 1, count + 1) {
                        if interval > 0 { try await Task.sleep(for: .seconds(interval)) }
                        try await writer.write(ByteBuffer(string: "id: \(n)\nevent: token\ndata: token-\(n)\n\n"))
                        sent += 1
                        if dropAfter > 0, sent >= dropAfter, n < count {
                            // Let the events go out first, as a server that dies does.
                            try await Task.sleep(for: .milliseconds(50))
                            throw DroppedOnPurpose()
                        }
                    }
                    try await writer.finish(nil)
                })
        }

        // A file of `size` bytes (see `fileByte`) with a strong ETag and a
        // Last-Modified, both changed by `POST /api/file/change?key=`; `Range: bytes=N-`
        // and `If-Range` answer 206 from N (416 past the end). `cut_after` cuts the
        // connection after that many bytes of a response (of the first `cut_times`
        // responses for `key`, when given); `no_range=1` ignores ranges (always 200);
        // `weak=1` sends a weak ETag and no Last-Modified (nothing to resume with);
        // `ignore_if_range=1` answers a range of the current version whatever If-Range
        // says (as a careless proxy does); `cap=N` ends each range answer after N bytes.
        let versions = Locked<[String: Int]>([:])
        let cuts = Locked<[String: Int]>([:])
        api.post("file/change") { request, _ in
            guard let key = request.uri.queryParameters.get("key") else { return Response(status: .badRequest) }
            versions.withLock { $0[key, default: 1] += 1 }
            return Response(status: .noContent)
        }
        api.get("file") { request, _ in
            let query = request.uri.queryParameters
            let size = try wholeNumber(query.get("size"), named: "size", in: 0...(1 << 30), default: 1 << 20)
            var cutAfter = try wholeNumber(query.get("cut_after"), named: "cut_after", in: 0...(1 << 30), default: 0)
            let cutTimes = try wholeNumber(query.get("cut_times"), named: "cut_times", in: 0...1_000_000, default: 1_000_000)
            let key = query.get("key").map { String($0) } ?? ""
            let version = versions.withLock { $0[key] ?? 1 }
            if cutAfter > 0, !key.isEmpty {
                let cutSoFar = cuts.withLock { counts in
                    defer { counts[key, default: 0] += 1 }
                    return counts[key] ?? 0
                }
                if cutSoFar >= cutTimes { cutAfter = 0 }
            }
            let weak = query.get("weak") == "1"
            let etag = (weak ? "W/" : "") + "\"file-\(size)-v\(version)\""
            let lastModified = HTTPDate.format(Date(timeIntervalSince1970: 1_700_000_000 + Double(version) * 86_400))
            var start = 0
            if query.get("no_range") != "1" {
                guard
                    let from = rangeStart(
                        request, size: size, etag: etag, lastModified: lastModified,
                        ignoringIfRange: query.get("ignore_if_range") == "1")
                else {
                    return Response(status: .rangeNotSatisfiable, headers: [.contentRange: "bytes */\(size)", .contentLength: "0"])
                }
                start = from
            }
            // `cap=N`: a range answer carries at most N bytes, as some servers do.
            let cap = try wholeNumber(query.get("cap"), named: "cap", in: 0...(1 << 30), default: 0)
            let end = start > 0 && cap > 0 ? min(size, start + cap) : size
            var headers: HTTPFields = [.contentType: "application/octet-stream", .eTag: etag, .acceptRanges: "bytes"]
            if !weak { headers[.lastModified] = lastModified }
            if start > 0 { headers[.contentRange] = "bytes \(start)-\(end - 1)/\(size)" }
            let from = start
            let cut = cutAfter
            return Response(
                status: start > 0 ? .partialContent : .ok, headers: headers,
                body: .init(contentLength: end - from) { writer in
                    var position = from
                    var sent = 0
                    while position < end {
                        var step = min(64 * 1024, end - position)
                        if cut > 0 { step = min(step, cut - sent) }
                        // The pattern repeats every 251 bytes: slice it out of one long run.
                        let phase = position % 251
                        try await writer.write(filePattern.getSlice(at: phase, length: step)!)
                        position += step
                        sent += step
                        if cut > 0, sent >= cut, position < end {
                            try await Task.sleep(for: .milliseconds(50))
                            throw DroppedOnPurpose()
                        }
                    }
                    try await writer.finish(nil)
                })
        }

        // `application/jsonl`: `count` lines `{"n":1}` … in chunks of `per_chunk` lines.
        api.get("export.jsonl") { request, _ in
            let query = request.uri.queryParameters
            let count = try wholeNumber(query.get("count"), named: "count", in: 0...1_000_000, default: 100)
            let perChunk = try wholeNumber(query.get("per_chunk"), named: "per_chunk", in: 1...10_000, default: 50)
            return Response(
                status: .ok, headers: [.contentType: "application/jsonl"],
                body: .init { writer in
                    var n = 1
                    while n <= count {
                        var chunk = ""
                        for _ in 0..<perChunk where n <= count {
                            chunk += "{\"n\":\(n)}\n"
                            n += 1
                        }
                        try await writer.write(ByteBuffer(string: chunk))
                    }
                    try await writer.finish(nil)
                })
        }
    }

    /// Byte `index` of every `/api/file`: a pattern a test can check at any offset.
    static func fileByte(_ index: Int) -> UInt8 {
        UInt8(truncatingIfNeeded: (index % 251 * 31 + 7) % 251)
    }

    /// 64 KiB of the pattern and one period more, so any 64 KiB step is one slice.
    static let filePattern = ByteBuffer(bytes: (0..<(64 * 1024 + 251)).map(fileByte))

    /// The answer to a `Range: bytes=N-` request for a file of `size` bytes whose
    /// validators are `etag` and `lastModified`: the offset to send from (0 for the
    /// whole file), or nil when the range cannot be satisfied.
    static func rangeStart(_ request: Request, size: Int, etag: String, lastModified: String, ignoringIfRange: Bool = false) -> Int? {
        guard let range = request.headers[.range] else { return 0 }
        // Only the one form a resumed download sends; anything else gets the whole file.
        guard range.hasPrefix("bytes="), range.hasSuffix("-"), let start = Int(range.dropFirst(6).dropLast()), start >= 0 else { return 0 }
        if !ignoringIfRange, let ifRange = request.headers[HTTPField.Name("If-Range")!], ifRange != etag, ifRange != lastModified {
            return 0  // the file changed: all of it
        }
        guard start < size else { return nil }
        return start
    }
    /// Ends a response body without its end: the connection is cut.
    struct DroppedOnPurpose: Error {}
}
#endif  // DemoServer
