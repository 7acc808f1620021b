#if AsyncHTTPClient
import AsyncHTTPClient
import Catena
import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1

// Heads both ways: the fields a request goes out with, and the checks and conversions
// of a response head before Catena reads its body.
extension AsyncHTTPClientTransport {
    /// The header fields AsyncHTTPClient sends for `request`.
    func headers(for request: APIRequest) throws(CatenaError) -> HTTPHeaders {
        var headers = HTTPHeaders()
        headers.reserveCapacity(request.headerFields.count + 3)
        var cookies = false
        for field in request.headerFields {
            if field.name == .cookie { cookies = true; continue }
            headers.add(name: field.name.rawName, value: field.value)
        }
        // HTTPFields keeps each cookie as a field of its own; HTTP/1.1 allows one
        // Cookie line (RFC 6265, section 5.4), its pairs joined with "; ".
        if cookies, let cookie = request.headerFields[.cookie] { headers.add(name: "Cookie", value: cookie) }
        if !request.body.isEmpty, request.headerFields[.contentType] == nil, let contentType = request.body.contentType {
            headers.add(name: "Content-Type", value: try request.checkedContentType(contentType))
        }
        // Without decoding, ask for none: a client whose decompressor Catena was not told
        // about would otherwise add its own Accept-Encoding, and the bodies it decodes
        // could not be told from bodies still encoded.
        if request.headerFields[.acceptEncoding] == nil {
            headers.add(name: "Accept-Encoding", value: decodesCompression ? ContentCoding.acceptEncoding : "identity")
        }
        // Over a Unix socket AsyncHTTPClient has no host to name; HTTP/1.1 needs one.
        if request[option: UnixSocket.self] != nil, let host = request.host {
            let name = host.contains(":") ? "[\(host)]" : host
            headers.add(name: "Host", value: request.port.map { "\(name):\($0)" } ?? name)
        }
        return headers
    }

    /// ASCII letters and digits: everything else in a socket path is percent-encoded.
    private static let unreservedASCII = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")

    /// The URL for this transport's client, after refusing HTTPS to an IP address through
    /// a proxy of the configuration's own: Catena's routes, which check such a target's
    /// certificate against its address, do not see that proxy, and NIOSSL would compare
    /// the certificate with the proxy's address. (A client given with `init(client:)` is
    /// not read: give proxies as `ProxySettings`.)
    func targetURL(of request: APIRequest) throws(CatenaError) -> String {
        if hasOwnProxy, request.scheme?.lowercased() == "https", let host = request.host, IPAddress.bytes(of: host) != nil,
            request[option: UnixSocket.self] == nil
        {
            throw CatenaError(
                .invalidRequest, request: request,
                detail:
                    "HTTPS to an IP address through the configuration's own proxy cannot be checked (the certificate would be compared with the proxy's address): give the proxy as ProxySettings, or use the server's host name"
            )
        }
        return try Self.targetURL(of: request)
    }

    /// The URL AsyncHTTPClient is given: the request's, or for a request over a Unix
    /// socket (`UnixSocket`) the same path and query with the socket as the host,
    /// percent-encoded, in AsyncHTTPClient's `http+unix` scheme.
    static func targetURL(of request: APIRequest) throws(CatenaError) -> String {
        let url = try request.urlString()
        guard let socket = request[option: UnixSocket.self] else { return url }
        // sun_path holds 108 bytes with its terminating zero on Linux, 104 on Apple platforms.
        guard !socket.isEmpty, socket.utf8.count < 104, !socket.utf8.contains(0) else {
            throw CatenaError(
                .invalidRequest, request: request,
                detail: "the Unix socket path must be 1 to 103 bytes without a NUL; it has \(socket.utf8.count)")
        }
        let authority = url.range(of: "://").map { url[$0.upperBound...] } ?? url[...]
        let rest = authority.firstIndex(where: { $0 == "/" || $0 == "?" }).map { authority[$0...] } ?? "/"
        let encoded = socket.addingPercentEncoding(withAllowedCharacters: Self.unreservedASCII) ?? socket
        return "\(request.scheme ?? "http")+unix://\(encoded)\(rest)"
    }

    /// A status that is no HTTP status, or two Content-Lengths that disagree, is no
    /// usable response. Returns the declared Content-Length, when it is a number.
    ///
    /// One pass over the fields, comparing names on their bytes: `HTTPHeaders`' subscript
    /// makes an array of the values on every lookup, and each lookup walks all fields.
    @discardableResult
    func checkHead(status: HTTPResponseStatus, headers: HTTPHeaders, request: APIRequest) throws(CatenaError) -> Int? {
        guard (100...999).contains(Int(status.code)) else {
            throw CatenaError(.invalidResponse, request: request, detail: "the status code \(status.code) is not a valid HTTP status")
        }
        var length: String?
        var lengths = 0
        var lengthsDisagree = false
        var encodings: [String] = []
        for (name, value) in headers {
            switch name.utf8.count {
            case 14 where name.equalsIgnoringASCIICase("content-length"):
                lengths += 1
                if let length { lengthsDisagree = lengthsDisagree || length != value } else { length = value }
            case 16 where name.equalsIgnoringASCIICase("content-encoding"):
                encodings.append(value)
            default:
                break
            }
        }
        if lengthsDisagree {
            throw CatenaError(.invalidResponse, request: request, detail: "the response has \(lengths) different Content-Length fields")
        }
        // NIOHTTPResponseDecompressor decodes a body whose first Content-Encoding member is
        // gzip or deflate, and only that one: a body it decoded has exactly that one
        // member (`identity, gzip` it leaves encoded). Anything else would reach the
        // caller still encoded.
        try ContentCoding.check(contentEncoding: encodings, status: Int(status.code), request: request) {
            decodesCompression && ($0 == ["gzip"] || $0 == ["deflate"])
        }
        return length.flatMap { Int($0) }
    }

    /// A status as HTTPTypes spells it, for a head `checkHead` passed: HTTPTypes traps on a
    /// code above 999, which NIO's HTTP/1 parser never yields (three digits) but its
    /// HTTP/2 codec does (`:status` is not range-checked there).
    static func status(of status: HTTPResponseStatus) -> HTTPResponse.Status {
        assert((100...999).contains(status.code), "checkHead lets no status outside 100...999 through")
        return HTTPResponse.Status(code: Int(status.code), reasonPhrase: status.reasonPhrase)
    }

    static func fields(of headers: HTTPHeaders, dropping dropped: StaticString? = nil) -> HTTPFields {
        var fields = HTTPFields()
        fields.reserveCapacity(headers.count)
        for (name, value) in headers {
            // In any case: a WebSocket's head reaches here without the handler that removes a server's.
            if let dropped, name.utf8.count == dropped.utf8CodeUnitCount, name.equalsIgnoringASCIICase(dropped) { continue }
            guard let name = HTTPField.Name(name) else { continue }
            fields.append(HTTPField(name: name, value: value))
        }
        return fields
    }
}

extension TimeAmount {
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self = .nanoseconds(
            seconds.multipliedReportingOverflow(by: 1_000_000_000).overflow
                ? Int64.max : seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
#endif  // AsyncHTTPClient
