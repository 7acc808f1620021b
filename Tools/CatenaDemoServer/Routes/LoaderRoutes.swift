#if DemoServer
import Catena
import Foundation
import Hummingbird
import NIOCore

/// Routes for testing the loader suite: faults, rate limits, concurrency, auth.
/// State is per server and keyed by a client-chosen `key`, so tests running in
/// parallel never see each other's counts.
enum LoaderRoutes {
    typealias Context = DemoRoutes.Context

    /// The demo's basic-auth account.
    static let basicUser = "catena"
    static let basicPassword = "chains"

    final class State: Sendable {
        struct InFlight: Codable { var current = 0; var peak = 0; var total = 0 }
        struct Token { var email: String; var expires: Date }
        struct Grants: Codable { var password = 0; var refresh = 0; var invalid = 0 }

        let calls = Locked<[String: Int]>([:])
        let inFlight = Locked<[String: InFlight]>([:])
        let tokens = Locked<[String: Token]>([:])
        let refreshTokens = Locked<[String: String]>([:])
        let grants = Locked(Grants())
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

        // A resource that wants a live bearer token from /oauth/token.
        api.get("protected/me") { request, _ in
            let presented = request.headers[.authorization].flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil }
            let token = presented.flatMap { value in state.tokens.withLock { $0[value] } }
            guard let token, token.expires > Date() else {
                return Response(
                    status: .unauthorized, headers: [.wwwAuthenticate: #"Bearer error="invalid_token""#],
                    body: .init(byteBuffer: ByteBuffer(string: #"{"error":"invalid_token"}"#)))
            }
            return try DemoRoutes.json(["email": token.email])
        }

        // OAuth 2 token endpoint (RFC 6749): password and refresh_token grants, form
        // encoded. `expires_in` (seconds, demo only) sets the access token's lifetime.
        router.post("oauth/token") { request, _ in
            let body = try await request.body.collect(upTo: 1 << 16)
            let form = parseForm(String(buffer: body))
            let lifetime = try number(form["expires_in"], named: "expires_in", in: 0...3600, default: 60)
            let email: String
            switch form["grant_type"] {
            case "password":
                guard let username = form["username"], UserStore.user(email: username) != nil, form["password"]?.isEmpty == false else {
                    state.grants.withLock { $0.invalid += 1 }
                    return oauthError("invalid_grant")
                }
                state.grants.withLock { $0.password += 1 }
                email = username
            case "refresh_token":
                guard let refresh = form["refresh_token"], let owner = state.refreshTokens.withLock({ $0.removeValue(forKey: refresh) }) else {
                    state.grants.withLock { $0.invalid += 1 }
                    return oauthError("invalid_grant")
                }
                state.grants.withLock { $0.refresh += 1 }
                email = owner
            default:
                return oauthError("unsupported_grant_type")
            }
            let access = UUID().uuidString
            let refresh = UUID().uuidString
            state.tokens.withLock { $0[access] = State.Token(email: email, expires: Date().addingTimeInterval(lifetime)) }
            state.refreshTokens.withLock { $0[refresh] = email }
            return DemoRoutes.rawJSON(
                #"{"access_token":"\#(access)","token_type":"Bearer","expires_in":\#(Int(lifetime)),"refresh_token":"\#(refresh)"}"#,
                status: .ok)
        }

        // Expires an access token now (form: token=...), as if its lifetime had passed.
        router.post("oauth/expire") { request, _ in
            let body = try await request.body.collect(upTo: 1 << 16)
            guard let token = parseForm(String(buffer: body))["token"] else { return oauthError("invalid_request") }
            state.tokens.withLock { $0[token]?.expires = .distantPast }
            return Response(status: .noContent)
        }

        router.get("oauth/stats") { _, _ in
            try DemoRoutes.json(state.grants.withLock { $0 })
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

    static func oauthError(_ code: String) -> Response {
        DemoRoutes.rawJSON(#"{"error":"\#(code)"}"#, status: .badRequest)
    }

    static func parseForm(_ text: String) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            func decode(_ part: Substring) -> String {
                part.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(part)
            }
            fields[decode(parts[0])] = parts.count > 1 ? decode(parts[1]) : ""
        }
        return fields
    }

}
#endif  // DemoServer
