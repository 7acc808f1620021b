#if DemoServer
import Catena
import Foundation
import Hummingbird
import NIOCore

/// Routes for testing the loader suite: faults, rate limits, concurrency, basic auth
/// (OAuth lives in ``OAuthRoutes``).
/// State is per server and keyed by a client-chosen `key`, so tests running in
/// parallel never see each other's counts.
enum LoaderRoutes {
    typealias Context = DemoRoutes.Context

    /// The demo's basic-auth account.
    static let basicUser = "catena"
    static let basicPassword = "chains"

    final class State: Sendable {
        struct InFlight: Codable { var current = 0; var peak = 0; var total = 0 }

        let calls = Locked<[String: Int]>([:])
        let inFlight = Locked<[String: InFlight]>([:])
    }

    static func add(to router: Router<Context>) {
        let state = State()
        let api = router.group("api")

        // Fails the first `failures` calls per `key` with `status` (503 by default),
        // optionally with Retry-After in seconds or as an HTTP date that many seconds
        // ahead; then answers 200 with the number of calls.
        for method in [HTTPRequest.Method.get, .post, .put, .delete] {
            api.on("flaky", method: method) { request, _ in
                let query = request.uri.queryParameters
                let key = query.get("key") ?? "default"
                let failures = query.get("failures", as: Int.self) ?? 1
                let status = query.get("status", as: Int.self) ?? 503
                let call = state.calls.withLock { calls -> Int in
                    calls[key, default: 0] += 1
                    return calls[key]!
                }
                guard call > failures else {
                    var headers = HTTPFields()
                    if let seconds = query.get("retry_after") {
                        headers[.retryAfter] = seconds
                    } else if let text = query.get("retry_after_date") {
                        let ahead = try number(text, named: "retry_after_date", in: -1e9...1e9, default: 0)
                        headers[.retryAfter] = HTTPDate.format(Date().addingTimeInterval(ahead))
                    }
                    headers[.contentType] = "application/json"
                    return Response(
                        status: .init(code: status), headers: headers,
                        body: .init(byteBuffer: ByteBuffer(string: #"{"error":"flaky","call":\#(call)}"#)))
                }
                return DemoRoutes.rawJSON(#"{"call":\#(call)}"#, status: .ok)
            }
        }

        // Counts requests in flight per `key` while holding each for `hold` seconds.
        api.get("inflight") { request, _ in
            let query = request.uri.queryParameters
            let key = query.get("key") ?? "default"
            let hold = try number(query.get("hold"), named: "hold", in: 0...120, default: 0.1)
            state.inFlight.withLock { all in
                all[key, default: .init()].current += 1
                all[key]!.total += 1
                all[key]!.peak = max(all[key]!.peak, all[key]!.current)
            }
            defer { state.inFlight.withLock { $0[key]?.current -= 1 } }
            try await Task.sleep(for: .seconds(hold))
            return DemoRoutes.rawJSON("{}", status: .ok)
        }
        api.get("inflight/stats") { request, _ in
            let key = request.uri.queryParameters.get("key") ?? "default"
            return try DemoRoutes.json(state.inFlight.withLock { $0[key] ?? .init() })
        }

        // HTTP Basic: user "catena", password "chains".
        api.get("basic-auth") { request, _ in
            let expected = "Basic " + Data("\(basicUser):\(basicPassword)".utf8).base64EncodedString()
            guard request.headers[.authorization] == expected else {
                return Response(status: .unauthorized, headers: [.wwwAuthenticate: #"Basic realm="catena-demo""#])
            }
            return DemoRoutes.rawJSON(#"{"authenticated":"\#(basicUser)"}"#, status: .ok)
        }

        // Redirects to the same port on another host name (localhost or 127.0.0.1),
        // to check that credentials do not follow a request to another origin.
        api.get("redirect-host") { request, _ in
            let query = request.uri.queryParameters
            guard let host = query.get("host"), ["localhost", "127.0.0.1"].contains(host),
                let target = query.get("to"), target.hasPrefix("/"), !target.hasPrefix("//"),
                let authority = request.head.authority, let port = authority.split(separator: ":").last.flatMap({ Int($0) })
            else { return DemoRoutes.apiError("host must be localhost or 127.0.0.1, to a path") }
            return Response(status: .found, headers: [.location: "http://\(host):\(port)\(target)"])
        }
    }
}
#endif  // DemoServer
