#if DemoServer
import Catena
import Crypto
import Foundation
import Hummingbird
import NIOCore

/// Reading the requests the authorization server gets, and writing its answers.
extension OAuthRoutes {
    // MARK: Client authentication

    /// A client's id and secret as the request presents them (RFC 6749 §2.3.1).
    /// `twice`: Basic and form credentials both, more than one method (§2.3).
    struct Credentials {
        let id: String, secret: String?, basic: Bool, twice: Bool
    }

    /// HTTP Basic (id and secret each form-encoded before joining, so decoded after
    /// splitting), else `client_id` and `client_secret` in the form; nil when neither.
    static func credentials(_ request: Request, _ form: Form) -> Credentials? {
        guard let header = request.headers[.authorization], header.prefix(6).lowercased() == "basic " else {
            return form["client_id"].map { Credentials(id: $0, secret: form["client_secret"], basic: false, twice: false) }
        }
        let decoded = Data(base64Encoded: header.dropFirst(6).trimmingCharacters(in: .whitespaces)).flatMap { String(data: $0, encoding: .utf8) }
        let parts = (decoded ?? "").split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        let id = formDecode(parts[0])
        // The same id in the form as well is harmless; a secret there, or another id, is not.
        let twice = form["client_secret"] != nil || form["client_id"].map { $0 != id } == true
        return Credentials(id: id, secret: parts.count > 1 ? formDecode(parts[1]) : nil, basic: true, twice: twice)
    }

    /// The registered client that `presented` proves to be, allowed `grant` when one is named.
    static func authenticate(_ presented: Credentials?, for grant: String?) throws -> Client {
        guard let presented else { throw OAuthError("invalid_client", "no client authentication") }
        guard !presented.twice else { throw OAuthError("invalid_request", "more than one client authentication method") }
        guard let client = Client(id: presented.id) else { throw OAuthError("invalid_client", "unknown client", basicChallenge: presented.basic) }
        guard (presented.secret ?? "") == (client.secret ?? "") else {
            let description = client.secret == nil ? "a public client has no secret" : "wrong or missing client secret"
            throw OAuthError("invalid_client", description, basicChallenge: presented.basic)
        }
        if let grant, !client.grants.contains(grant) { throw OAuthError("unauthorized_client", "\(client.id) may not use \(grant)") }
        return client
    }

    /// An OAuth error answer (RFC 6749 §5.2): 401 for invalid_client, 400 for the rest.
    struct OAuthError: HTTPResponseError {
        let code: String, description: String, basicChallenge: Bool
        /// A replayed refresh token, counted as such.
        var reuse = false

        init(_ code: String, _ description: String, basicChallenge: Bool = false) {
            self.code = code
            self.description = description
            self.basicChallenge = basicChallenge
        }

        var status: HTTPResponse.Status { code == "invalid_client" ? .unauthorized : .badRequest }

        func response(from request: Request, context: some RequestContext) throws -> Response {
            var response = try DemoRoutes.json(["error": code, "error_description": description], status: status)
            response.headers[.cacheControl] = "no-store"
            if basicChallenge { response.headers[.wwwAuthenticate] = #"Basic realm="catena-demo""# }
            return response
        }
    }

    // MARK: Helpers

    /// A form-encoded body of at most 64 KiB. A parameter may appear once (RFC 6749 §3.2),
    /// but `resource` and `audience` may repeat (RFC 8707), and the first is kept; an empty
    /// one counts as absent.
    struct Form {
        private var fields: [String: String] = [:]

        init(_ request: Request) async throws {
            let body = try await request.body.collect(upTo: 1 << 16)
            for pair in String(buffer: body).split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let name = OAuthRoutes.formDecode(parts[0])
                let value = parts.count > 1 ? OAuthRoutes.formDecode(parts[1]) : ""
                guard !value.isEmpty else { continue }
                guard fields[name] == nil else {
                    if name == "resource" || name == "audience" { continue }
                    throw OAuthError("invalid_request", "\(name) appears more than once")
                }
                fields[name] = value
            }
        }

        subscript(name: String) -> String? { fields[name] }
    }

    /// RFC 8414 §2, with the endpoints at `origin`.
    struct Metadata: Encodable {
        let issuer, authorization_endpoint, token_endpoint, device_authorization_endpoint, revocation_endpoint: String
        var response_types_supported = ["code"]
        var grant_types_supported = ["authorization_code", "client_credentials", "refresh_token", OAuthRoutes.deviceGrant, "password"]
        var code_challenge_methods_supported = ["S256"]
        var token_endpoint_auth_methods_supported = ["none", "client_secret_basic", "client_secret_post"]
        var scopes_supported = ["read", "write"]
        /// RFC 9207: authorization responses carry `iss`.
        var authorization_response_iss_parameter_supported = true

        init(issuer: String, origin: String) {
            self.issuer = issuer
            authorization_endpoint = origin + "/oauth/authorize"
            token_endpoint = origin + "/oauth/token"
            device_authorization_endpoint = origin + "/oauth/device"
            revocation_endpoint = origin + "/oauth/revoke"
        }
    }

    struct DeviceAuthorization: Encodable {
        let device_code, user_code, verification_uri, verification_uri_complete: String
        let expires_in, interval: Int
    }

    /// The origin the client reached, which is also the issuer. The scheme is the server's
    /// (Hummingbird marks HTTP/1.1 requests http even over TLS).
    static func origin(of request: Request, scheme: String) -> String {
        "\(scheme)://\(request.head.authority ?? "localhost")"
    }

    /// A loopback `http` URI on any port and path, without user info or fragment (RFC 8252 §7.3).
    static func isLoopback(_ uri: String) -> Bool {
        guard let parts = URLComponents(string: uri), parts.scheme?.lowercased() == "http", parts.user == nil, parts.password == nil,
            parts.fragment == nil, let host = parts.host?.lowercased()
        else { return false }
        return ["127.0.0.1", "localhost", "::1", "[::1]"].contains(host)
    }

    /// `uri` with `fields` (those with a value) added to its query, after `&` when it has one.
    static func redirect(to uri: String, _ fields: [(String, String?)]) -> Response {
        let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        let query = fields.compactMap { name, value in
            value.map { "\(name)=\($0.addingPercentEncoding(withAllowedCharacters: unreserved) ?? "")" }
        }
        return Response(status: .found, headers: [.location: uri + (uri.contains("?") ? "&" : "?") + query.joined(separator: "&")])
    }

    static func plainText(_ text: String, status: HTTPResponse.Status) -> Response {
        Response(status: status, headers: [.contentType: "text/plain; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    /// A requested scope: words "read" and "write"; "read" when none is asked; nil for any other word.
    static func parseScope(_ text: String?) -> String? {
        let words = (text ?? "").split(separator: " ").map(String.init)
        guard !words.isEmpty else { return "read" }
        return words.allSatisfy { scopes.contains($0) } ? words.joined(separator: " ") : nil
    }

    /// Whether `text` is 43 to 128 ASCII letters, digits and `extra` (PKCE's lengths, RFC 7636 §4.1).
    static func isMade(_ text: String, of extra: String) -> Bool {
        (43...128).contains(text.count) && text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || extra.contains($0)) }
    }

    /// 32 random bytes, base64url: for tokens and codes.
    static func randomToken() -> String {
        base64URL(Data((0..<32).map { _ in UInt8.random(in: .min ... .max) }))
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    static func formDecode(_ part: Substring) -> String {
        part.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(part)
    }
}
#endif  // DemoServer
