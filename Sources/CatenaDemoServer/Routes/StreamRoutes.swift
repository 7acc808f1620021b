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
        // that has nothing left.
        api.get("events") { request, _ in
            let query = request.uri.queryParameters
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

    /// Ends a response body without its end: the connection is cut.
    struct DroppedOnPurpose: Error {}
}
