// URLSession and its configuration are FoundationNetworking's on Linux, Foundation's on
// Apple platforms: the module that holds them is imported publicly.
#if canImport(FoundationNetworking)
import Foundation
public import FoundationNetworking
#else
public import Foundation
#endif
import HTTPTypes

/// A transport that sends requests with `URLSession`: the default on Apple platforms,
/// and available on Linux through FoundationNetworking.
///
/// Catena makes the session itself, from Catena's configuration or yours, because it
/// needs its own delegate on it: that delegate counts body bytes as they arrive (so
/// ``MaximumResponseSize`` bounds memory, also for a compressed body), answers a 401's
/// challenge with the 401 itself, and hands redirects to Catena, which follows them
/// with the same rules on every transport (see ``Redirects``). The request's timeout is
/// Catena's own timer over the whole exchange (corelibs URLSession rounds its own down
/// to whole seconds and only measures silence).
///
/// The default session is ephemeral, with no URL cache and no cookie handling, so a
/// response is never served from a cache you did not put in the chain and cookies are
/// never sent behind your back.
///
/// On Linux, prefer `AsyncHTTPClientTransport` (module `CatenaAsyncHTTPClient`): it is
/// several times faster there, with less CPU per call, and keeps its connections
/// pooled under concurrency, where corelibs URLSession opens new ones.
public struct URLSessionTransport: HTTPLoader {
    /// The timeout for requests that set none (see ``RequestTimeout``).
    public let timeout: Duration
    private let owner: URLSessionOwner

    /// The session requests go through. Catena owns it: do not invalidate it.
    public var session: URLSession { owner.session }

    /// A transport over the shared Catena session (ephemeral, no cache, no cookies),
    /// which lives as long as the process and needs no shutdown.
    public init(timeout: Duration = .seconds(60)) {
        self.owner = URLSessionOwner.shared
        self.timeout = timeout
    }

    /// A transport over a new session made from `configuration`. The session is
    /// invalidated, after its running tasks, when the last copy of the transport goes.
    public init(configuration: URLSessionConfiguration, timeout: Duration = .seconds(60)) {
        self.owner = URLSessionOwner(configuration: configuration, shared: false)
        self.timeout = timeout
    }

    /// A transport over a new session that trusts HTTPS servers as `trust` says.
    ///
    /// - Throws: ``ServerTrustError`` for anything but ``ServerTrust/system``, for now
    ///   on every platform: corelibs Foundation on Linux hands libcurl the system's CA
    ///   store and nothing else (it reads `URLSessionCertificateAuthorityInfoFile` on
    ///   Android only, raises no server-trust challenge and has no pinning hook), and
    ///   the server-trust challenge that would do it on Apple platforms is not yet
    ///   written. Refused at setup, never a connection checked less than asked.
    ///
    /// A client identity (mutual TLS) is refused too, for now on every platform: corelibs
    /// Foundation has no way to hand libcurl a client certificate, and the Apple
    /// platforms' client-certificate challenge is not yet answered. Use
    /// `AsyncHTTPClientTransport(trust:identity:)` for a server that asks for one.
    ///
    /// Proxy settings are refused too. On Linux, libcurl follows the proxy environment
    /// variables by itself, as curl does (`http_proxy`, `https_proxy`/`HTTPS_PROXY`,
    /// `all_proxy`/`ALL_PROXY`, `no_proxy`/`NO_PROXY`; not `HTTP_PROXY`), for every
    /// URLSession in the process, and corelibs ignores `connectionProxyDictionary`: a
    /// session can be neither given a proxy nor kept from the environment's. On Apple
    /// platforms the system's proxy settings apply. Use
    /// `AsyncHTTPClientTransport(trust:proxy:)` to choose, or
    /// `ProxySettings.environment()` there to follow the variables on both.
    public init(
        configuration: URLSessionConfiguration = URLSessionTransport.defaultConfiguration, trust: ServerTrust,
        identity: ClientIdentity? = nil, proxy: ProxySettings? = nil, timeout: Duration = .seconds(60)
    ) throws(ServerTrustError) {
        guard proxy == nil else {
            throw ServerTrustError(
                "URLSessionTransport cannot be given proxy settings (on Linux libcurl follows the environment's proxy "
                    + "variables by itself and corelibs ignores connectionProxyDictionary): use AsyncHTTPClientTransport(trust:proxy:)")
        }
        guard identity == nil else {
            throw ServerTrustError(
                "URLSessionTransport cannot present a client certificate (corelibs Foundation has no way to give libcurl one): "
                    + "use AsyncHTTPClientTransport(trust:identity:) for mutual TLS")
        }
        guard trust.isSystemDefault else {
            #if canImport(FoundationNetworking)
            throw ServerTrustError(
                "URLSession on Linux trusts the system's CA store only (no roots of your own, no pins): "
                    + "install the CA in the system store, or use AsyncHTTPClientTransport(trust:)")
            #else
            throw ServerTrustError("URLSessionTransport does not yet check roots of your own or pins on this platform")
            #endif
        }
        self.init(configuration: configuration, timeout: timeout)
    }

    /// Catena's configuration: ephemeral, no URL cache, no cookies, 64 connections per host.
    public static var defaultConfiguration: URLSessionConfiguration {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.httpShouldSetCookies = false
        configuration.httpCookieAcceptPolicy = .never
        configuration.httpMaximumConnectionsPerHost = 64
        return configuration
    }

    public func load(_ request: APIRequest) async throws(CatenaError) -> APIResponse {
        guard !request.isWebSocketUpgrade else { throw Self.refusingWebSocket(request) }
        return try await Redirects.follow(request, defaultTimeout: timeout) { hop, left throws(CatenaError) in
            let (head, outcome) = try await send(hop, timeout: left, streaming: false)
            var response = APIResponse(status: head.status, headerFields: head.headerFields, body: outcome.body, request: hop)
            response.timing = outcome.timing
            return response
        }
    }

    /// Streams the body through the session delegate as it arrives (see
    /// ``StreamedResponse``): the request's timeout covers the time to the head,
    /// ``StreamIdleTimeout`` the silences after it; while the reader's window is full
    /// the task is suspended.
    public func stream(_ request: APIRequest) async throws(CatenaError) -> StreamedResponse {
        guard !request.isWebSocketUpgrade else { throw Self.refusingWebSocket(request) }
        return try await Redirects.follow(request, defaultTimeout: timeout, head: \.head, discard: { $0.body.cancel() }) { hop, left throws(CatenaError) in
            let (head, outcome) = try await send(hop, timeout: left, streaming: true)
            let body = outcome.channel.map { ResponseBody(channel: $0) } ?? ResponseBody(outcome.body)
            var response = StreamedResponse(status: head.status, headerFields: head.headerFields, body: body, request: hop)
            response.timing = outcome.timing
            return response
        }
    }

    /// URLSession's WebSocket task is missing from corelibs Foundation (its libcurl has
    /// none); on Apple platforms it would bypass the transport's routes: both refuse.
    private static func refusingWebSocket(_ request: APIRequest) -> CatenaError {
        CatenaError(
            .invalidRequest, request: request,
            detail: "URLSessionTransport does not open WebSockets: open them through AsyncHTTPClientTransport (the CatenaAsyncHTTPClient product)")
    }

    /// One exchange, no redirects followed.
    private func send(
        _ request: APIRequest, timeout: Duration, streaming: Bool
    ) async throws(CatenaError) -> (head: APIResponse, outcome: URLSessionCall.Outcome) {
        if request[option: UnixSocket.self] != nil {
            throw CatenaError(
                .invalidRequest, request: request,
                detail: "URLSession cannot connect to a Unix socket (UnixSocket): use AsyncHTTPClientTransport")
        }
        var urlRequest = URLRequest(url: try request.url())
        // GET is a new request's method already; corelibs' setter compares the text with
        // six methods, case-insensitively, through NSString.
        if request.method != .get { urlRequest.httpMethod = request.method.rawValue }
        // corelibs turns this into an idle timer of whole seconds, rounded down: keep it
        // clear of Catena's own deadline, which is the real limit (for a stream, the
        // idle timeout is Catena's too).
        // Clamped: corelibs multiplies it by 1,000 into an Int, which traps when huge.
        urlRequest.timeoutInterval = streaming ? 1e9 : min((timeout.seconds + 1).rounded(.up), 1e9)
        // Set at once, as `addValue(_:forHTTPHeaderField:)` would have them (names
        // capitalized as Foundation does, repeated fields joined with ","), without its
        // per-field cost: `capitalized` and a case-insensitive search through the fields so
        // far, each through Foundation. The values need no check of corelibs': HTTPFields
        // holds no CR, LF or NUL.
        var headers: [String: String] = [:]
        headers.reserveCapacity(request.headerFields.count + 2)
        var cookies = false
        for field in request.headerFields {
            if field.name == .cookie { cookies = true; continue }
            let name = Self.capitalized(field.name)
            headers[name] = headers[name].map { $0 + "," + field.value } ?? field.value
        }
        // HTTPFields keeps each cookie as a field of its own; URLRequest would join them
        // with ",", which is no cookie syntax: one Cookie field, pairs joined with "; ".
        if cookies, let cookie = request.headerFields[.cookie] { headers["Cookie"] = cookie }
        // libcurl would offer every coding it was built with (brotli and zstd among them):
        // offer the ones both transports decode.
        if request.headerFields[.acceptEncoding] == nil { headers["Accept-Encoding"] = ContentCoding.acceptEncoding }
        // Checked before the body is produced, as on AsyncHTTPClient.
        let contentType = try request.headerFields[.contentType] == nil ? request.body.contentType.map(request.checkedContentType) : nil
        let body = try await request.bodyData()
        if let body {
            request[option: UploadProgress.self]?(TransferProgress(completed: 0, total: Int64(body.count)))
            if let contentType { headers["Content-Type"] = contentType }
        }
        urlRequest.allHTTPHeaderFields = headers
        guard !Task.isCancelled else { throw CatenaError(.cancelled, request: request) }

        var mapStreamError: (@Sendable (any Error) -> CatenaError)?
        if streaming {
            mapStreamError = { error in Self.map(error, request: request, timeout: timeout) }
        }
        let call = URLSessionCall(request: request, timeout: timeout, router: owner.router, streaming: mapStreamError)
        let prepared = urlRequest
        let outcome: URLSessionCall.Outcome
        do {
            outcome = try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    call.start(continuation: continuation) {
                        if let body {
                            owner.session.uploadTask(with: prepared, from: body)
                        } else {
                            owner.session.dataTask(with: prepared)
                        }
                    }
                }
            } onCancel: {
                call.cancel()
            }
        } catch let error as CatenaError {
            throw error
        } catch {
            throw Self.map(error, request: request, timeout: timeout)
        }
        if let sent = body?.count {
            request[option: UploadProgress.self]?(TransferProgress(completed: Int64(sent), total: Int64(sent)))
        }
        let http = outcome.response
        guard (100...999).contains(http.statusCode) else {
            outcome.channel?.terminate(with: CatenaError(.invalidResponse, request: request, detail: "invalid status"))
            throw CatenaError(.invalidResponse, request: request, detail: "the status code \(http.statusCode) is not a valid HTTP status")
        }
        let head = APIResponse(
            status: HTTPResponse.Status(code: http.statusCode, reasonPhrase: Self.reasonPhrase(http.statusCode)),
            headerFields: outcome.fields, body: Data(), request: request)
        return (head, outcome)
    }

    /// A field's name as Foundation's `capitalized` spells it, which is how URLRequest
    /// keeps the names it is given (and corelibs looks some of them up that way, such as
    /// `Authorization` when it decides what to cache): each letter that starts a word
    /// upper case, the others lower case. In a token, a word ends at anything but a letter
    /// and the three characters Foundation passes over (`'`, `^` and `` ` ``).
    static func capitalized(_ name: HTTPField.Name) -> String {
        var bytes = Array(name.canonicalName.utf8)
        var inWord = false
        for index in bytes.indices {
            switch bytes[index] {
            case UInt8(ascii: "a")...UInt8(ascii: "z"):
                if !inWord { bytes[index] -= 0x20 }
                inWord = true
            case UInt8(ascii: "'"), UInt8(ascii: "^"), UInt8(ascii: "`"):
                break
            default:
                inWord = false
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// URLSession does not expose the reason phrase the server sent; use the standard one.
    static func reasonPhrase(_ code: Int) -> String {
        switch code {
        case 100: "Continue"
        case 200: "OK"
        case 201: "Created"
        case 202: "Accepted"
        case 204: "No Content"
        case 206: "Partial Content"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 303: "See Other"
        case 304: "Not Modified"
        case 307: "Temporary Redirect"
        case 308: "Permanent Redirect"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 409: "Conflict"
        case 410: "Gone"
        case 412: "Precondition Failed"
        case 413: "Content Too Large"
        case 415: "Unsupported Media Type"
        case 422: "Unprocessable Content"
        case 429: "Too Many Requests"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        default: ""
        }
    }

    static func map(_ error: any Error, request: APIRequest, timeout: Duration) -> CatenaError {
        if error is TotalTimeoutReached { return CatenaError(.timedOut, request: request, detail: "no complete answer within \(timeout)") }
        if error is CancellationError || Task.isCancelled { return CatenaError(.cancelled, request: request, underlyingError: error) }
        guard let urlError = error as? URLError else { return CatenaError.wrapping(error, request: request) }
        // corelibs reports most of libcurl's failures as `unknown`, with curl's own
        // message as the description: that message says what happened.
        let message = (urlError as NSError).userInfo[NSLocalizedDescriptionKey] as? String ?? ""
        let code: CatenaError.Code
        var detail: String?
        switch urlError.code {
        case .cancelled:
            code = .cancelled
        case .timedOut:
            code = .timedOut
            detail = "no answer within \(timeout)"
        case .cannotConnectToHost:
            code = .cannotConnect
            detail = "connection refused"
        case .cannotFindHost, .dnsLookupFailed:
            code = .cannotConnect
            detail = "unknown host"
        case .serverCertificateUntrusted, .serverCertificateHasBadDate, .serverCertificateNotYetValid, .serverCertificateHasUnknownRoot:
            code = .untrustedServer
            detail = "the server's certificate failed validation" + (message.isEmpty ? "" : " (\(message))")
        case .notConnectedToInternet, .secureConnectionFailed, .clientCertificateRejected, .internationalRoamingOff:
            code = .cannotConnect
        case .networkConnectionLost:
            code = .connectionLost
            detail = "the connection closed before the response was complete"
        case .unsupportedURL where request.scheme == "http" || request.scheme == "https":
            // libcurl's "unsupported protocol" for an http URL: the answer was not HTTP
            // (a garbage status line reads as HTTP/0.9, which it refuses).
            code = .invalidResponse
            detail = "the server's answer is not HTTP" + (message.isEmpty ? "" : " (\(message))")
        case .badURL, .unsupportedURL:
            code = .invalidRequest
        case .badServerResponse, .cannotParseResponse, .cannotDecodeRawData, .cannotDecodeContentData, .zeroByteResource,
            .httpTooManyRedirects, .redirectToNonExistentLocation:
            let (classified, text) = classify(curlMessage: message)
            code = classified == .connectionLost ? .connectionLost : .invalidResponse
            detail = text
        default:
            (code, detail) = classify(curlMessage: message)
        }
        return CatenaError(code, request: request, underlyingError: urlError, detail: detail)
    }

    /// The code for one of libcurl's error messages, and the message as the detail.
    static func classify(curlMessage message: String) -> (CatenaError.Code, String?) {
        let text = message.lowercased()
        guard !text.isEmpty else { return (.unknown, nil) }
        // "SSL certificate problem: unable to get local issuer certificate" (or "...
        // certificate has expired"), "SSL: no alternative certificate subject name
        // matches target host name".
        let untrusted = ["ssl certificate problem", "subject name", "certificate verify", "peer certificate"]
        if untrusted.contains(where: text.contains) { return (.untrustedServer, message) }
        // "OpenSSL/3.0.x: error:0A00010B:SSL routines::wrong version number", "TLS connect
        // error", "SSL_ERROR_SYSCALL …": the handshake failed, not the trust.
        let handshake = ["ssl routines", "wrong version number", "tls connect", "ssl_error", "ssl connect", "handshake"]
        if handshake.contains(where: text.contains) { return (.cannotConnect, "\(CatenaError.tlsHandshakeFailure) (\(message))") }
        let lost = ["transfer closed", "connection reset", "recv failure", "send failure", "connection died", "empty reply"]
        if lost.contains(where: text.contains) { return (.connectionLost, message) }
        // libcurl reports a head over its size limit as "Out of memory".
        let framing = [
            "chunk", "unencoding", "content encoding", "transfer-encoding", "header", "http/0.9", "weird server reply",
            "unsupported http version", "invalid status line", "content-length", "malformed", "nul byte",
            "out of memory",
        ]
        if framing.contains(where: text.contains) { return (.invalidResponse, message) }
        return (.unknown, message)
    }
}
