#if DemoServer
import Catena
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import NIOFoundationCompat
import Synchronization

/// The request context of every route: Hummingbird's basics and the peer's address.
struct DemoRequestContext: RequestContext, RemoteAddressRequestContext {
    var coreContext: CoreRequestContextStorage
    let remoteAddress: SocketAddress?

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }
}

/// The demo server's routes. Every route honours `?delay=SECONDS` (capped at 120 s).
enum DemoRoutes {
    typealias Context = DemoRequestContext

    /// The largest request body the server reads (echo routes included).
    static let maximumBodySize = 64 * 1024 * 1024

    /// The routes, and whether a bearer token is one `/oauth/token` issued and still
    /// honours (for the WebSocket routes).
    static func makeRouter(
        photos: PhotoSettings = PhotoSettings(), requests: RequestTally = RequestTally(), secure: Bool = false
    ) -> (Router<Context>, isLiveToken: @Sendable (String) -> Bool) {
        let router = Router(context: Context.self)
        router.add(middleware: CountingMiddleware(tally: requests))
        router.add(middleware: HeadMiddleware())
        router.add(middleware: DelayMiddleware())
        router.add(middleware: CompressionMiddleware())
        addUserRoutes(to: router)
        addTestRoutes(to: router)
        LoaderRoutes.add(to: router)
        let isLiveToken = OAuthRoutes.add(to: router, scheme: secure ? "https" : "http")
        PhotoRoutes.add(to: router, settings: photos)
        CacheRoutes.add(to: router)
        StreamRoutes.add(to: router)
        IdempotencyRoutes.add(to: router)
        HealthRoutes.add(to: router)
        return (router, isLiveToken)
    }

    // MARK: reqres.in users

    static func addUserRoutes(to router: Router<Context>) {
        let nextID = Atomic<Int>(UserStore.users.count + 1)
        let api = router.group("api")

        // The user routes answer with validators and `Cache-Control: no-cache`: a client
        // cache may keep them, and asks each time whether they are still current (304).
        api.get("users") { request, _ in
            let query = request.uri.queryParameters
            let perPage = max(1, min(query.get("per_page", as: Int.self) ?? 6, 100))
            let page = try wholeNumber(query.get("page"), named: "page", in: 1...1_000_000, default: 1)
            let total = UserStore.users.count
            let start = min((page - 1) * perPage, total)
            let slice = Array(UserStore.users[start..<min(start + perPage, total)])
            return CacheRoutes.cacheable(
                request,
                body: try jsonBuffer(
                    UserPage(
                        page: page, per_page: perPage, total: total,
                        total_pages: (total + perPage - 1) / perPage, data: slice, support: Support())))
        }

        api.get("users/:id") { request, context in
            guard let user = context.parameters.get("id", as: Int.self).flatMap(UserStore.user(id:)) else {
                return rawJSON("{}", status: .notFound)
            }
            return CacheRoutes.cacheable(request, body: try jsonBuffer(SingleUser(data: user, support: Support())))
        }

        api.post("users") { request, context in
            var object = try await jsonObject(from: request)
            object["id"] = .string(String(nextID.add(1, ordering: .relaxed).oldValue))
            object["createdAt"] = .string(timestamp())
            return try json(object, status: .created)
        }

        let update: @Sendable (Request, Context) async throws -> Response = { request, context in
            guard context.parameters.get("id", as: Int.self).flatMap(UserStore.user(id:)) != nil else {
                return rawJSON("{}", status: .notFound)
            }
            var object = try await jsonObject(from: request)
            object["updatedAt"] = .string(timestamp())
            return try json(object)
        }
        api.put("users/:id", use: update)
        api.patch("users/:id", use: update)

        api.delete("users/:id") { _, context in
            guard context.parameters.get("id", as: Int.self).flatMap(UserStore.user(id:)) != nil else {
                return rawJSON("{}", status: .notFound)
            }
            return Response(status: .noContent)
        }

        api.post("login") { request, _ in
            let credentials = try await decodeCredentials(request)
            guard let email = credentials.email ?? credentials.username, !email.isEmpty else {
                return apiError("Missing email or username")
            }
            guard let password = credentials.password, !password.isEmpty else { return apiError("Missing password") }
            guard UserStore.user(email: email) != nil else { return apiError("user not found") }
            return try json(["token": UserStore.token(for: email)])
        }

        api.post("register") { request, _ in
            let credentials = try await decodeCredentials(request)
            guard let email = credentials.email ?? credentials.username, !email.isEmpty else {
                return apiError("Missing email or username")
            }
            guard let password = credentials.password, !password.isEmpty else { return apiError("Missing password") }
            guard let user = UserStore.user(email: email) else {
                return apiError("Note: Only defined users succeed registration")
            }
            return rawJSON(#"{"id":\#(user.id),"token":"\#(UserStore.token(for: email))"}"#, status: .ok)
        }
    }

    // MARK: Transport test routes

    static func addTestRoutes(to router: Router<Context>) {
        let api = router.group("api")

        // The client's address and port as the server sees them: requests that share
        // a connection (HTTP/2 streams, or HTTP/1.1 keep-alive) report the same port.
        api.get("connection") { _, context in
            let peer = context.remoteAddress.map { "\($0.ipAddress ?? "?"):\($0.port ?? 0)" } ?? "unknown"
            return Response(
                status: .ok, headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(string: #"{"peer":"\#(peer)"}"#)))
        }

        // Echoes the request as JSON: method, path, query, headers, body (UTF-8 when it
        // is text, base64 otherwise), body length and an FNV-1a checksum of the body.
        let echo: @Sendable (Request, Context) async throws -> Response = { request, _ in
            let body = try await request.body.collect(upTo: maximumBodySize)
            let bytes = body.readableBytesView
            let text = String(validating: bytes, as: UTF8.self)
            var headers: [String: String] = [:]
            for field in request.headers {
                let name = field.name.canonicalName
                headers[name] = headers[name].map { "\($0), \(field.value)" } ?? field.value
            }
            let report = EchoReport(
                method: request.method.rawValue,
                authority: request.head.authority ?? "",
                path: request.uri.path,
                query: request.uri.query ?? "",
                headers: headers,
                body: bytes.count <= 1 << 20 ? (text ?? Data(bytes).base64EncodedString()) : nil,
                bodyEncoding: text != nil ? "utf8" : "base64",
                bodyLength: bytes.count,
                bodyChecksum: fnv1a(bytes))
            return try json(report)
        }
        for method in [HTTPRequest.Method.get, .post, .put, .patch, .delete, .head, .options] {
            api.on("echo", method: method, use: echo)
            api.on("echo/**", method: method, use: echo)
        }

        // The request body, returned as it came (for large-body round trips).
        api.post("echo-raw") { request, _ in
            let body = try await request.body.collect(upTo: maximumBodySize)
            return Response(status: .ok, headers: [.contentType: "application/octet-stream"], body: .init(byteBuffer: body))
        }

        // Reads the request body slowly (`interval` seconds between chunks), so that a
        // client's upload stalls and can be cancelled mid-way; then answers with the
        // byte count. `GET /api/slow-upload/stats?key=` says how far each key got.
        let slowUploads = Locked<[String: (bytes: Int, complete: Bool)]>([:])
        api.post("slow-upload") { request, _ in
            let key = request.uri.queryParameters.get("key") ?? "default"
            let interval = try number(request.uri.queryParameters.get("interval"), named: "interval", in: 0...5, default: 0.05)
            var total = 0
            for try await chunk in request.body {
                total += chunk.readableBytes
                slowUploads.withLock { $0[key] = (total, false) }
                try await Task.sleep(for: .seconds(interval))
            }
            slowUploads.withLock { $0[key] = (total, true) }
            return rawJSON(#"{"bytes":\#(total)}"#, status: .ok)
        }
        api.get("slow-upload/stats") { request, _ in
            let key = request.uri.queryParameters.get("key") ?? "default"
            let (bytes, complete) = slowUploads.withLock { $0[key] ?? (0, false) }
            return rawJSON(#"{"bytes":\#(bytes),"complete":\#(complete)}"#, status: .ok)
        }

        // N deterministic bytes: byte i is i % 251.
        api.get("bytes/:count") { _, context in
            guard let count = context.parameters.get("count", as: Int.self), (0...maximumBodySize).contains(count) else {
                return apiError("count must be 0...\(maximumBodySize)")
            }
            return Response(status: .ok, headers: [.contentType: "application/octet-stream"], body: .init(byteBuffer: patternBytes(count)))
        }

        // Any status code, with a small JSON body unless the status forbids one.
        for method in [HTTPRequest.Method.get, .post, .put, .delete] {
            api.on("status/:code", method: method) { _, context in
                guard let code = context.parameters.get("code", as: Int.self), (200...599).contains(code) else {
                    return apiError("status code must be 200...599")
                }
                if code == 204 || code == 304 { return Response(status: .init(code: code)) }
                return rawJSON(#"{"status":\#(code)}"#, status: .init(code: code))
            }
        }

        // Sets the cookies the request asks for, one Set-Cookie field per `cookie`
        // parameter, verbatim: ?cookie=session%3Dabc%3B%20Path%3D%2Fapi&cookie=...
        // What the client sends back shows in /api/echo's headers.
        api.get("cookies/set") { request, _ in
            let values = request.uri.queryParameters.getAll("cookie")
            guard values.count <= 100 else { return apiError("at most 100 cookies") }
            var headers = HTTPFields()
            for value in values {
                guard !value.contains(where: { $0 == "\r" || $0 == "\n" }) else { return apiError("a cookie cannot span lines") }
                headers.append(HTTPField(name: .setCookie, value: value))
            }
            headers[.contentType] = "application/json; charset=utf-8"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: #"{"set":\#(values.count)}"#)))
        }

        // Redirects to a path on this server: ?to=/api/users/2&status=302
        // GET, and POST: a 307 or 308 to a POST endpoint tests what a client resends.
        for method in [HTTPRequest.Method.get, .post] {
            api.on("redirect", method: method) { request, _ in
                let query = request.uri.queryParameters
                guard let target = query.get("to"), target.hasPrefix("/"), !target.hasPrefix("//") else {
                    return apiError("to must be a path on this server, starting with a single /")
                }
                let status = query.get("status", as: Int.self) ?? 302
                guard [301, 302, 303, 307, 308].contains(status) else { return apiError("status must be a redirect code") }
                return Response(status: .init(code: status), headers: [.location: target])
            }
        }

        // A redirect whose URL carries a secret the server made, as a presigned URL's
        // signature does: ?name=X-Amz-Signature answers Location, Link and Refresh with
        // /api/echo?X-Amz-Signature=<random>.
        api.get("redirect-signed") { request, _ in
            let name = request.uri.queryParameters.get("name") ?? "signature"
            guard !name.isEmpty, name.utf8.count <= 64, name.utf8.allSatisfy({ $0 < 0x80 && (isalnum(Int32($0)) != 0 || "-_.".utf8.contains($0)) })
            else { return apiError("name must be 1 to 64 letters, digits, -, _ or .") }
            let target = "/api/echo?\(name)=\(UUID().uuidString.replacingOccurrences(of: "-", with: ""))"
            var headers = HTTPFields()
            headers[.location] = target
            headers[HTTPField.Name("Link")!] = "<\(target)>; rel=\"next\""
            headers[HTTPField.Name("Refresh")!] = "0; url=\(target)"
            return Response(status: .found, headers: headers)
        }

        // A request that never ends: headers are sent, then the body trickles.
        api.get("drip") { request, _ in
            let chunks = max(1, min(request.uri.queryParameters.get("chunks", as: Int.self) ?? 10, 1000))
            let interval = try number(request.uri.queryParameters.get("interval"), named: "interval", in: 0...60, default: 0.1)
            return Response(
                status: .ok, headers: [.contentType: "application/octet-stream"],
                body: .init { writer in
                    for _ in 0..<chunks {
                        try await Task.sleep(for: .seconds(interval))
                        try await writer.write(ByteBuffer(string: "."))
                    }
                    try await writer.finish(nil)
                })
        }
    }

    // MARK: Helpers

    static func json(_ value: some Encodable, status: HTTPResponse.Status = .ok) throws -> Response {
        Response(status: status, headers: [.contentType: "application/json; charset=utf-8"], body: .init(byteBuffer: try jsonBuffer(value)))
    }

    /// `value` as JSON with sorted keys (so that equal values give equal bytes and ETags).
    static func jsonBuffer(_ value: some Encodable) throws -> ByteBuffer {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return ByteBuffer(data: try encoder.encode(value))
    }

    static func rawJSON(_ text: String, status: HTTPResponse.Status) -> Response {
        Response(status: status, headers: [.contentType: "application/json; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    /// reqres's error shape: 400 with `{"error": "..."}`.
    static func apiError(_ message: String, status: HTTPResponse.Status = .badRequest) -> Response {
        (try? json(["error": message], status: status)) ?? Response(status: status)
    }

    static func timestamp() -> String {
        Date().formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true).timeZone(separator: .omitted))
    }

    /// The body as a flat JSON object of strings, numbers and booleans (reqres echoes
    /// what it was sent). A malformed body is a 400 that says why.
    static func jsonObject(from request: Request) async throws -> [String: JSONScalar] {
        let body = try await request.body.collect(upTo: maximumBodySize)
        if body.readableBytes == 0 { return [:] }
        do {
            return try JSONDecoder().decode([String: JSONScalar].self, from: body)
        } catch {
            throw HTTPError(.badRequest, message: "body is not a JSON object of strings, numbers and booleans")
        }
    }

    /// Login and register take JSON or form-url-encoded bodies.
    static func decodeCredentials(_ request: Request) async throws -> Credentials {
        let body = try await request.body.collect(upTo: 1 << 16)
        if body.readableBytes == 0 { return Credentials(email: nil, username: nil, password: nil) }
        do {
            if request.headers[.contentType]?.hasPrefix("application/x-www-form-urlencoded") == true {
                return try URLEncodedFormDecoder().decode(Credentials.self, from: String(buffer: body))
            }
            return try JSONDecoder().decode(Credentials.self, from: body)
        } catch {
            throw HTTPError(.badRequest, message: "body is not valid JSON credentials")
        }
    }

    /// `count` bytes where byte i is i % 251, written a period at a time.
    static func patternBytes(_ count: Int) -> ByteBuffer {
        let period = (0..<251).map { UInt8($0) }
        var buffer = ByteBuffer()
        buffer.reserveCapacity(count)
        while buffer.readableBytes + period.count <= count { buffer.writeBytes(period) }
        buffer.writeBytes(period[0..<(count - buffer.readableBytes)])
        return buffer
    }

    static func fnv1a(_ bytes: some Sequence<UInt8>) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return String(hash, radix: 16)
    }
}

/// What `/api/echo` answers.
struct EchoReport: Encodable {
    let method: String
    /// The Host field (HTTP/1.1) or `:authority` (HTTP/2).
    let authority: String
    let path: String
    let query: String
    let headers: [String: String]
    let body: String?
    let bodyEncoding: String
    let bodyLength: Int
    let bodyChecksum: String
}

/// A JSON value that is not an object or array.
enum JSONScalar: Codable, Sendable, ExpressibleByStringLiteral {
    case string(String), number(Double), bool(Bool), null

    init(stringLiteral value: String) { self = .string(value) }

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else {
            self = .string(try container.decode(String.self))
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .string(let value): try container.encode(value)
        case .number(let value): try value.rounded() == value && abs(value) < 1e15 ? container.encode(Int(value)) : container.encode(value)
        case .bool(let value): try container.encode(value)
        case .null: try container.encodeNil()
        }
    }
}

/// Sleeps for `?delay=SECONDS` (at most 120) before handling the request, as reqres does.
struct DelayMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let delay = try number(request.uri.queryParameters.get("delay"), named: "delay", in: 0...120, default: 0)
        if delay > 0 {
            try await Task.sleep(for: .seconds(delay))
        }
        return try await next(request, context)
    }
}
#endif  // DemoServer
