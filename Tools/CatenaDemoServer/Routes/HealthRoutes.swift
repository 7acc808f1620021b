#if DemoServer
import Catena
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// Routes that behave as a real API's limits and failures do, for the health
/// middleware's tests, demos and benchmark.
///
/// - `GET /api/limited?quota=Q&window=W&style=ietf|x`: at most Q calls (1…100,000,
///   default 10) per window of W seconds (0.1…3600, default 1) for each client (its
///   `X-Client` field, else "anonymous"). A window starts with a client's first call
///   after the last one ended, as GitHub's do. Each answer announces the quota: IETF
///   `RateLimit-Policy` and `RateLimit` (delta seconds, rounded up), or with `style=x`
///   `X-RateLimit-Limit`, `-Remaining` and `-Reset` (epoch seconds, rounded up). Past
///   the quota: 429 with `Retry-After` and an RFC 9457 problem.
///   `GET /api/limited/stats?client=NAME` says how many calls were served and refused.
/// - `GET /api/outage?key=K&fail=SECONDS&retry-after=N`: fails with 503 and a problem
///   (with `Retry-After: N` when given) for SECONDS (at most 3600) after the key's first
///   call, then answers 200: a backend that fails for a while and recovers.
///   `GET /api/outage/stats?key=K` counts the key's calls and failures, and says when the
///   last 64 calls arrived (`arrivals`, seconds since 1970).
/// - `GET /api/problem`: RFC 9457's own example, a 403 with extension members.
enum HealthRoutes {
    /// Clients and keys kept at most; the oldest go first.
    static let keptKeys = 10_000

    private struct Quota {
        var windowEnd: Date = .distantPast
        var used = 0
        var served = 0
        var refused = 0
    }

    private struct Flaky {
        var start: Date
        var calls = 0
        var failed = 0
        /// When the last 64 calls arrived (seconds since 1970): a test tells what came when.
        var arrivals: [Double] = []
    }

    /// A bounded map: inserting past `keptKeys` drops the oldest key.
    private struct Bounded<Value: Sendable>: Sendable {
        var values: [String: Value] = [:]
        var order: [String] = []

        mutating func update<T>(_ key: String, make: () -> Value, _ body: (inout Value) -> T) -> T {
            if values[key] == nil {
                values[key] = make()
                order.append(key)
                if order.count > HealthRoutes.keptKeys { values[order.removeFirst()] = nil }
            }
            return body(&values[key]!)
        }
    }

    static func add(to router: Router<DemoRoutes.Context>) {
        let api = router.group("api")
        let quotas = Locked(Bounded<Quota>())
        let flaky = Locked(Bounded<Flaky>())

        api.get("limited") { request, _ in
            let query = request.uri.queryParameters
            let quota = try wholeNumber(query.get("quota"), named: "quota", in: 1...100_000, default: 10)
            let window = try number(query.get("window"), named: "window", in: 0.1...3600, default: 1)
            let style = query.get("style") ?? "ietf"
            guard style == "ietf" || style == "x" else { return DemoRoutes.apiError("style must be ietf or x") }
            let client = String((request.headers[HTTPField.Name("X-Client")!] ?? "anonymous").prefix(64))
            let now = Date()
            let (allowed, remaining, end) = quotas.withLock { quotas in
                quotas.update("\(client) \(quota) \(window) \(style)", make: { Quota() }) { state -> (Bool, Int, Date) in
                    if now >= state.windowEnd {
                        state.windowEnd = now.addingTimeInterval(window)
                        state.used = 0
                    }
                    guard state.used < quota else {
                        state.refused += 1
                        return (false, 0, state.windowEnd)
                    }
                    state.used += 1
                    state.served += 1
                    return (true, quota - state.used, state.windowEnd)
                }
            }
            let reset = Int(end.timeIntervalSince(now).rounded(.up))
            var headers: HTTPFields = [:]
            if style == "ietf" {
                headers[HTTPField.Name("RateLimit-Policy")!] = #""demo";q=\#(quota);w=\#(window.formatted(.number.grouping(.never)))"#
                headers[HTTPField.Name("RateLimit")!] = #""demo";r=\#(remaining);t=\#(reset)"#
            } else {
                headers[HTTPField.Name("X-RateLimit-Limit")!] = "\(quota)"
                headers[HTTPField.Name("X-RateLimit-Remaining")!] = "\(remaining)"
                headers[HTTPField.Name("X-RateLimit-Reset")!] = "\(Int(end.timeIntervalSince1970.rounded(.up)))"
            }
            guard allowed else {
                headers[.retryAfter] = "\(max(1, reset))"
                return problem(
                    status: .tooManyRequests, type: "https://catena.example/problems/rate-limited", title: "Too many requests",
                    detail: "\(client) has used its \(quota) calls in this window; it resets in \(reset) s", headers: headers)
            }
            var response = try DemoRoutes.json(["client": client, "remaining": "\(remaining)"])
            response.headers.append(contentsOf: headers)
            return response
        }

        api.get("limited/stats") { request, _ in
            let client = request.uri.queryParameters.get("client") ?? "anonymous"
            let (served, refused) = quotas.withLock { quotas in
                quotas.values.filter { $0.key.hasPrefix(client + " ") }.values.reduce((0, 0)) { ($0.0 + $1.served, $0.1 + $1.refused) }
            }
            return try DemoRoutes.json(["served": served, "refused": refused])
        }

        api.get("outage") { request, _ in
            let query = request.uri.queryParameters
            let key = String((query.get("key") ?? "default").prefix(64))
            let failFor = try number(query.get("fail"), named: "fail", in: 0...3600, default: 10)
            let retryAfter = try query.get("retry-after").map { try wholeNumber($0, named: "retry-after", in: 0...3600, default: 0) }
            let now = Date()
            let failing = flaky.withLock { flaky in
                flaky.update(key, make: { Flaky(start: now) }) { state -> Bool in
                    state.calls += 1
                    state.arrivals = Array((state.arrivals + [now.timeIntervalSince1970]).suffix(64))
                    let failing = now < state.start.addingTimeInterval(failFor)
                    if failing { state.failed += 1 }
                    return failing
                }
            }
            guard failing else { return try DemoRoutes.json(["key": key, "state": "recovered"]) }
            var headers: HTTPFields = [:]
            if let retryAfter { headers[.retryAfter] = "\(retryAfter)" }
            return problem(
                status: .serviceUnavailable, type: "https://catena.example/problems/backend-down", title: "The backend is unavailable",
                detail: "\(key) fails for \(failFor) s after its first call", headers: headers)
        }

        api.get("outage/stats") { request, _ in
            let key = request.uri.queryParameters.get("key") ?? "default"
            let (calls, failed, arrivals) = flaky.withLock { flaky in flaky.values[key].map { ($0.calls, $0.failed, $0.arrivals) } ?? (0, 0, []) }
            struct Stats: Encodable { let calls: Int, failed: Int, arrivals: [Double] }
            return try DemoRoutes.json(Stats(calls: calls, failed: failed, arrivals: arrivals))
        }

        api.get("problem") { _, _ in
            let body = #"""
                {"type":"https://example.com/probs/out-of-credit","title":"You do not have enough credit.",\#
                "detail":"Your current balance is 30, but that costs 50.","instance":"/account/12345/msgs/abc",\#
                "balance":30,"accounts":["/account/12345","/account/67890"],"status":403}
                """#
            return Response(
                status: .forbidden, headers: [.contentType: ProblemDetails.mediaType, .contentLanguage: "en"],
                body: .init(byteBuffer: ByteBuffer(string: body)))
        }
    }

    /// An RFC 9457 problem response.
    static func problem(status: HTTPResponse.Status, type: String, title: String, detail: String, headers: HTTPFields = [:]) -> Response {
        struct Problem: Encodable {
            let type: String, title: String, status: Int, detail: String
        }
        var fields = headers
        fields[.contentType] = ProblemDetails.mediaType
        let body = (try? DemoRoutes.jsonBuffer(Problem(type: type, title: title, status: status.code, detail: detail))) ?? ByteBuffer()
        return Response(status: status, headers: fields, body: .init(byteBuffer: body))
    }
}
#endif  // DemoServer
