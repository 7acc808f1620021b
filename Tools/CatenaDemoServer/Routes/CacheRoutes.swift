#if DemoServer
import Catena
import Foundation
import Hummingbird
import NIOCore

/// HTTP caching on the demo server: validators and `Cache-Control` on GET answers,
/// 304 for conditional requests that match, and a route to test a cache with.
enum CacheRoutes {
    /// A `Last-Modified` value: the date, and its text made once (a DateFormatter per
    /// request halved the server's throughput).
    struct LastModified: Sendable {
        let date: Date
        let text: String

        init(_ date: Date) {
            self.date = date
            self.text = HTTPDate.format(date)
        }

        /// When the demo data last changed (it never does): the `Last-Modified` of every
        /// data route.
        static let data = LastModified(Date(timeIntervalSince1970: 1_780_000_000))
    }

    /// `body` as a GET answer a cache can keep: `ETag` (a hash of the body),
    /// `Last-Modified`, `Cache-Control`. Answers 304 without a body when the request's
    /// `If-None-Match` (or, without one, `If-Modified-Since`) says the client has it.
    static func cacheable(
        _ request: Request,
        body: ByteBuffer,
        status: HTTPResponse.Status = .ok,
        cacheControl: String? = "no-cache",
        eTag: Bool = true,
        lastModified: LastModified? = .data,
        extra: HTTPFields = [:]
    ) -> Response {
        var headers = extra
        headers[.contentType] = headers[.contentType] ?? "application/json; charset=utf-8"
        if let cacheControl { headers[.cacheControl] = cacheControl }
        let tag = eTag ? "\"\(DemoRoutes.fnv1a(body.readableBytesView))\"" : nil
        if let tag { headers[.eTag] = tag }
        if let lastModified { headers[.lastModified] = lastModified.text }
        if status == .ok, isNotModified(request, tag: tag, lastModified: lastModified) {
            return Response(status: .notModified, headers: headers)
        }
        return Response(status: status, headers: headers, body: .init(byteBuffer: body))
    }

    static func isNotModified(_ request: Request, tag: String?, lastModified: LastModified?) -> Bool {
        if let asked = request.headers[.ifNoneMatch] {
            guard let tag else { return false }
            let weak = { (value: Substring) in value.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: "W/", with: "") }
            return asked.split(separator: ",").contains { weak($0) == "*" || weak($0) == tag }
        }
        if let since = request.headers[.ifModifiedSince], let lastModified, let date = HTTPDate.parse(since) {
            return lastModified.date.timeIntervalSince1970.rounded(.down) <= date.timeIntervalSince1970
        }
        return false
    }

    static func add(to router: Router<DemoRoutes.Context>) {
        // Full answers and 304s per key of `/api/cache/{key}`.
        let counts = Locked<[String: (full: Int, notModified: Int)]>([:])
        // Keys whose `/api/cache/{key}` answers 503 for now (`POST /api/cache-fail/{key}`).
        let failing = Locked<Set<String>>([])
        let api = router.group("api")

        // A resource to test caches with (GET and HEAD). Query: `max_age`, `expires` (seconds ahead, or
        // a raw value), `no_store`, `no_cache`,
        // `public`, `etag=0`, `last_modified=0`, `vary` (a header name), `size` (body
        // bytes), `swr` and `sie` (stale-while-revalidate, stale-if-error seconds),
        // `must_revalidate`, `age` (an Age field), `modified_ago` (seconds; else its
        // Last-Modified is months old). (Its `Date` is Hummingbird's: now.) The body names the key and counts full answers, so a client can tell
        // a cached body from a new one.
        // Bumped by `POST /api/cache-change/{key}`: the body, and so the ETag, changes.
        let revisions = Locked<[String: Int]>([:])
        let answer: @Sendable (Request, DemoRoutes.Context) -> Response = { request, context in
            let key = context.parameters.get("key") ?? "default"
            let query = request.uri.queryParameters
            var directives: [String] = []
            if let maxAge = query.get("max_age", as: Int.self) { directives.append("max-age=\(maxAge)") }
            if query.get("no_store") == "1" { directives.append("no-store") }
            if query.get("no_cache") == "1" { directives.append("no-cache") }
            if query.get("public") == "1" { directives.append("public") }
            if query.get("must_revalidate") == "1" { directives.append("must-revalidate") }
            if let window = query.get("swr", as: Int.self) { directives.append("stale-while-revalidate=\(window)") }
            if let window = query.get("sie", as: Int.self) { directives.append("stale-if-error=\(window)") }
            let size = max(0, min(query.get("size", as: Int.self) ?? 0, 1 << 20))
            let tagged = query.get("etag") != "0"
            let dated = query.get("last_modified") != "0"
            var extra = HTTPFields()
            if let vary = query.get("vary") { extra[.vary] = vary }
            if let age = query.get("age", as: Int.self) { extra[.age] = String(age) }
            if failing.withLock({ $0.contains(key) }) {
                counts.withLock { $0[key, default: (0, 0)].full += 1 }
                return DemoRoutes.rawJSON(#"{"error":"failing on purpose"}"#, status: .serviceUnavailable)
            }
            if let seconds = query.get("expires", as: Double.self), seconds.isFinite, abs(seconds) < 1e9 {
                extra[.expires] = HTTPDate.format(Date().addingTimeInterval(seconds))
                extra[.date] = HTTPDate.format(Date())
            } else if let expires = query.get("expires") {
                extra[.expires] = expires  // as given: "0" and other invalid dates mean "already expired"
            }
            // The body only changes when asked to (`version`), so validators stay stable.
            let version = query.get("version") ?? "1"
            // A revision takes its bytes from the padding when there is enough: the body
            // keeps its length, and only its ETag tells the change.
            let revision = revisions.withLock { $0[key] }.map { #","revision":\#($0)"# } ?? ""
            let padding = String(repeating: "x", count: size >= revision.utf8.count ? size - revision.utf8.count : size)
            let body = ByteBuffer(string: #"{"key":"\#(key)","version":"\#(version)"\#(revision),"padding":"\#(padding)"}"#)
            // `modified_ago`: a Last-Modified that many seconds before now (for the heuristic).
            let modified = query.get("modified_ago", as: Double.self).flatMap {
                $0.isFinite && abs($0) < 1e9 ? LastModified(Date().addingTimeInterval(-$0)) : nil
            }
            let response = cacheable(
                request, body: body, cacheControl: directives.isEmpty ? nil : directives.joined(separator: ", "),
                eTag: tagged, lastModified: dated ? modified ?? .data : nil, extra: extra)
            // HEAD: the GET's fields, Content-Length too, and no body (RFC 9110, 9.3.2); not counted.
            guard request.method != .head else {
                var headers = response.headers
                if response.status == .ok { headers[.contentLength] = String(body.readableBytes) }
                return Response(status: response.status, headers: headers)
            }
            counts.withLock { table in
                if response.status == .notModified { table[key, default: (0, 0)].notModified += 1 } else { table[key, default: (0, 0)].full += 1 }
            }
            return response
        }
        api.get("cache/:key", use: answer)
        api.head("cache/:key", use: answer)

        api.post("cache-change/:key") { _, context in
            let key = context.parameters.get("key") ?? "default"
            let revision = revisions.withLock { table in
                table[key, default: 0] += 1
                return table[key] ?? 0
            }
            return DemoRoutes.rawJSON(#"{"revision":\#(revision)}"#, status: .ok)
        }

        // `on=1` makes `/api/cache/{key}` answer 503 until `on=0`.
        api.post("cache-fail/:key") { request, context in
            let key = context.parameters.get("key") ?? "default"
            let on = request.uri.queryParameters.get("on") != "0"
            failing.withLock { if on { $0.insert(key) } else { $0.remove(key) } }
            return DemoRoutes.rawJSON(#"{"failing":\#(on)}"#, status: .ok)
        }

        // A write whose answer names other resources: `location` and `content_location`
        // come back as those fields, as a create's 201 would.
        api.post("cache-write") { request, _ in
            let query = request.uri.queryParameters
            var headers = HTTPFields()
            if let location = query.get("location") { headers[.location] = location }
            if let location = query.get("content_location") { headers[.contentLocation] = location }
            headers[.contentType] = "application/json; charset=utf-8"
            return Response(status: .created, headers: headers, body: .init(byteBuffer: ByteBuffer(string: "{}")))
        }

        api.get("cache-stats/:key") { _, context in
            let key = context.parameters.get("key") ?? "default"
            let (full, notModified) = counts.withLock { $0[key] ?? (0, 0) }
            return DemoRoutes.rawJSON(#"{"full":\#(full),"notModified":\#(notModified)}"#, status: .ok)
        }
    }
}
#endif  // DemoServer
