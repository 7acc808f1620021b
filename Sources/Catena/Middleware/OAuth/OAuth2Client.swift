public import Foundation
import HTTPTypes

/// An OAuth 2 client of one authorization server: who the app is (``clientID`` and how
/// it authenticates) and where the server's endpoints are. The flows are its methods:
///
/// - ``clientCredentials(scopes:audience:resources:parameters:)`` for server-to-server calls;
/// - ``authorizationRequest(redirectURI:scopes:parameters:)`` and ``exchange(_:for:)``
///   (authorization code with PKCE), or ``signInWithLoopback(scopes:timeout:open:)``;
/// - ``authorizeDevice(scopes:parameters:)`` and ``token(for:)`` (device authorization
///   grant, for tools without a browser);
/// - ``refresh(_:)`` and ``revoke(_:)``.
///
/// ``TokenAuthMiddleware/init(hosts:allowHTTP:client:signIn:storage:storageKey:token:leeway:clock:)``
/// puts it in a chain. Token requests go through `loader`, which should not hold the
/// TokenAuthMiddleware itself. Every endpoint must be https, or plain http to a
/// loopback host: secrets and codes never cross a network in clear text. Every failure
/// is a ``CatenaError``; an OAuth error answer is ``CatenaError/Code/authenticationFailed``
/// with an ``OAuth2Error`` underneath (``CatenaError/oauth``).
public struct OAuth2Client: Sendable {
    /// How the client proves who it is at the token and revocation endpoints (RFC 6749 §2.3).
    public enum Authentication: Sendable, CustomStringConvertible {
        /// A public client (an app or tool that cannot keep a secret): `client_id` only.
        case none
        /// `client_secret_basic`: HTTP Basic with the form-encoded id and secret.
        case clientSecretBasic(String)
        /// `client_secret_post`: `client_id` and `client_secret` in the form body.
        case clientSecretPost(String)

        /// The method's name, never the secret.
        public var description: String {
            switch self {
            case .none: "none"
            case .clientSecretBasic: "client_secret_basic"
            case .clientSecretPost: "client_secret_post"
            }
        }
    }

    /// Where the server's endpoints are; from ``discover(issuer:clientID:authentication:loader:clock:)``
    /// or given by hand.
    public struct Endpoints: Sendable, Hashable, Codable {
        /// The server's issuer identifier (RFC 8414), if known: a redirect's `iss` must match it.
        public var issuer: URL?
        public var token: URL
        public var authorization: URL?
        public var deviceAuthorization: URL?
        public var revocation: URL?

        public init(issuer: URL? = nil, token: URL, authorization: URL? = nil, deviceAuthorization: URL? = nil, revocation: URL? = nil) {
            self.issuer = issuer
            self.token = token
            self.authorization = authorization
            self.deviceAuthorization = deviceAuthorization
            self.revocation = revocation
        }
    }

    public let clientID: String
    public let endpoints: Endpoints
    public let authentication: Authentication
    let loader: any HTTPLoader
    let clock: any RetryClock

    /// - Parameters:
    ///   - clientID: the id the server registered the app under.
    ///   - authentication: how the app authenticates; `.none` for a public client.
    ///   - endpoints: the server's endpoints.
    ///   - loader: the chain token requests go through (without the TokenAuthMiddleware).
    ///   - clock: the time, for expiry and the device flow's polling.
    public init(
        clientID: String, authentication: Authentication = .none, endpoints: Endpoints, loader: any HTTPLoader,
        clock: any RetryClock = SystemRetryClock()
    ) {
        self.clientID = clientID
        self.authentication = authentication
        self.endpoints = endpoints
        self.loader = loader
        self.clock = clock
    }

    /// Reads the server's metadata (RFC 8414) at `issuer`'s
    /// `/.well-known/oauth-authorization-server` and makes a client with its endpoints.
    /// Fails with ``CatenaError/Code/authenticationFailed`` when the metadata names
    /// another issuer (a server may not speak for another) or lacks a token endpoint.
    ///
    /// - Parameters:
    ///   - issuer: the server's issuer identifier, such as `https://auth.example.com`.
    ///   - clientID: the id the server registered the app under.
    ///   - authentication: how the app authenticates; `.none` for a public client.
    ///   - loader: the chain the metadata and token requests go through.
    ///   - clock: the time, for expiry and the device flow's polling.
    public static func discover(
        issuer: URL, clientID: String, authentication: Authentication = .none, loader: any HTTPLoader,
        clock: any RetryClock = SystemRetryClock()
    ) async throws(CatenaError) -> OAuth2Client {
        let url = try metadataURL(for: issuer)
        var request = APIRequest(.get, url: url, headerFields: [.accept: "application/json"])
        request[option: MaximumResponseSize.self] = maximumAnswer
        let response = try await loader.load(request).validateStatus()
        struct Metadata: Decodable {
            let issuer: String?
            let token_endpoint: String?
            let authorization_endpoint: String?
            let device_authorization_endpoint: String?
            let revocation_endpoint: String?
        }
        let metadata = try response.decode(Metadata.self)
        // RFC 8414 §3.3: the issuer in the metadata must be the one asked for, exactly.
        guard let named = metadata.issuer, trimmed(named) == trimmed(issuer.absoluteString), let namedURL = URL(string: named) else {
            throw CatenaError(
                .authenticationFailed, request: request, response: response,
                underlyingError: OAuth2Error(.issuerMismatch, description: "the metadata names another issuer"),
                detail: "the metadata at \(url.absoluteString) is for another issuer")
        }
        func endpoint(_ text: String?, _ name: String) throws(CatenaError) -> URL? {
            guard let text else { return nil }
            guard let url = URL(string: text), url.host != nil, isSafe(url) else {
                throw CatenaError(.invalidResponse, request: request, response: response, detail: "the metadata's \(name) is not an https URL")
            }
            return url
        }
        guard let token = try endpoint(metadata.token_endpoint, "token_endpoint") else {
            throw CatenaError(.invalidResponse, request: request, response: response, detail: "the metadata has no token_endpoint")
        }
        // The metadata's own spelling: a redirect's `iss` must match it exactly (RFC 9207 §2.4).
        let endpoints = Endpoints(
            issuer: namedURL, token: token, authorization: try endpoint(metadata.authorization_endpoint, "authorization_endpoint"),
            deviceAuthorization: try endpoint(metadata.device_authorization_endpoint, "device_authorization_endpoint"),
            revocation: try endpoint(metadata.revocation_endpoint, "revocation_endpoint"))
        return OAuth2Client(clientID: clientID, authentication: authentication, endpoints: endpoints, loader: loader, clock: clock)
    }

    /// RFC 8414 §3.1: the well-known part goes between the host and the issuer's path.
    static func metadataURL(for issuer: URL) throws(CatenaError) -> URL {
        guard var components = URLComponents(url: issuer, resolvingAgainstBaseURL: false), issuer.host != nil, isSafe(issuer),
            components.query == nil, components.fragment == nil
        else {
            throw CatenaError(.invalidRequest, request: APIRequest(url: issuer), detail: "the issuer must be an https URL without query or fragment")
        }
        let path = components.percentEncodedPath
        components.percentEncodedPath = "/.well-known/oauth-authorization-server" + (path == "/" ? "" : path)
        return components.url!
    }

    private static func trimmed(_ text: String) -> String {
        text.hasSuffix("/") ? String(text.dropLast()) : text
    }

    /// https, or http to a loopback host.
    static func isSafe(_ url: URL) -> Bool {
        switch url.scheme?.lowercased() {
        case "https": true
        case "http": url.host.map { CredentialScope.isLoopback($0.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))) } ?? false
        default: false
        }
    }

    /// The largest token, device or metadata answer read: real ones are a few KiB.
    static let maximumAnswer = 64 * 1024

    // MARK: Refresh and revocation

    /// A new token by the refresh-token grant (RFC 6749 §6). When the server rotates
    /// refresh tokens, the new one is in the result and the old one is spent; when it
    /// sends none, the old one is kept. Fails when `token` has no refresh token.
    public func refresh(_ token: BearerToken) async throws(CatenaError) -> BearerToken {
        guard let refreshToken = token.refreshToken else {
            throw CatenaError(.authenticationFailed, request: APIRequest(url: endpoints.token), detail: "the token has no refresh token: sign in again")
        }
        var fresh = try await requestToken([("grant_type", "refresh_token"), ("refresh_token", refreshToken)])
        if fresh.refreshToken == nil { fresh.refreshToken = refreshToken }
        if fresh.scope == nil { fresh.scope = token.scope }
        return fresh
    }

    /// Revokes `token` at the server (RFC 7009): its refresh token, which also ends the
    /// access tokens issued with it on servers that tie them, then its access token.
    /// Fails when the server has no revocation endpoint or refuses; an unknown or
    /// already revoked token is no failure (the RFC answers 200 for it).
    public func revoke(_ token: BearerToken) async throws(CatenaError) {
        guard let url = endpoints.revocation else {
            throw CatenaError(.invalidRequest, request: APIRequest(url: endpoints.token), detail: "the server has no revocation endpoint")
        }
        if let refreshToken = token.refreshToken {
            _ = try await post(url, [("token", refreshToken), ("token_type_hint", "refresh_token")])
        }
        _ = try await post(url, [("token", token.accessToken), ("token_type_hint", "access_token")])
    }

    // MARK: Requests

    /// Any grant at the token endpoint: `parameters` plus the client's authentication;
    /// for grants of other specifications (token exchange, JWT bearer).
    public func requestToken(_ parameters: [(name: String, value: String)]) async throws(CatenaError) -> BearerToken {
        let (request, response) = try await post(endpoints.token, parameters)
        return try TokenAnswer.token(from: response, for: request, clock: clock)
    }

    /// Posts `parameters`, authenticated as the client, to `url`; an OAuth error answer
    /// becomes ``CatenaError/Code/authenticationFailed`` with the ``OAuth2Error``.
    func post(_ url: URL, _ parameters: [(name: String, value: String)]) async throws(CatenaError) -> (APIRequest, APIResponse) {
        var fields = parameters
        var headers: HTTPFields = [.accept: "application/json"]
        switch authentication {
        case .none:
            fields.append((name: "client_id", value: clientID))
        case .clientSecretPost(let secret):
            fields += [(name: "client_id", value: clientID), (name: "client_secret", value: secret)]
        case .clientSecretBasic(let secret):
            // RFC 6749 §2.3.1: each part form-encoded before they are joined.
            let pair = Self.formEncoded(clientID) + ":" + Self.formEncoded(secret)
            headers[.authorization] = "Basic " + Data(pair.utf8).base64EncodedString()
        }
        var request = APIRequest(.post, url: url, headerFields: headers, body: .form(fields))
        guard Self.isSafe(url) else {
            throw CatenaError(.invalidRequest, request: request, detail: "OAuth endpoints must be https (or http to a loopback host)")
        }
        // A redirect would resend the form, secrets and all, wherever it points.
        request[option: RedirectPolicy.self] = .never
        request[option: MaximumResponseSize.self] = Self.maximumAnswer
        let response = try await loader.load(request)
        if (200..<300).contains(response.status.code) { return (request, response) }
        var secrets = fields.filter { SecretNames.isSecret($0.name) }.map(\.value)
        if case .clientSecretBasic(let secret) = authentication { secrets.append(secret) }
        if let error = OAuth2Error(answer: response.body, secrets: secrets) {
            throw CatenaError(.authenticationFailed, request: request, response: response, underlyingError: error, detail: "the server answered \(error)")
        }
        _ = try response.validateStatus()
        return (request, response)
    }

    static func formEncoded(_ text: String) -> String {
        PercentEncoding.encode(text, allowing: PercentEncoding.queryComponent, spaceAsPlus: true)
    }
}

/// An error an OAuth 2 server answered (RFC 6749 §5.2, RFC 8628 §3.5), or a check of
/// the client's that failed (``Code/stateMismatch``, ``Code/issuerMismatch``).
///
/// ``description`` is the server's text made printable: control and bidirectional
/// characters replaced, cut at 300 characters, and scrubbed of the secrets the request
/// carried, should the server echo them.
public struct OAuth2Error: Error, Sendable, Hashable, CustomStringConvertible {
    /// The `error` code.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        public static let invalidRequest = Code(rawValue: "invalid_request")
        public static let invalidClient = Code(rawValue: "invalid_client")
        /// The code, refresh token or device code is spent, expired or revoked: sign in again.
        public static let invalidGrant = Code(rawValue: "invalid_grant")
        public static let unauthorizedClient = Code(rawValue: "unauthorized_client")
        public static let unsupportedGrantType = Code(rawValue: "unsupported_grant_type")
        public static let invalidScope = Code(rawValue: "invalid_scope")
        /// The user declined.
        public static let accessDenied = Code(rawValue: "access_denied")
        /// The device code expired before the user approved it (also when the client's
        /// own deadline passed).
        public static let expiredToken = Code(rawValue: "expired_token")
        public static let authorizationPending = Code(rawValue: "authorization_pending")
        public static let slowDown = Code(rawValue: "slow_down")
        /// The redirect's `state` is not the one the request sent: it may be forged.
        public static let stateMismatch = Code(rawValue: "state_mismatch")
        /// The server's metadata, or a redirect's `iss`, names another issuer.
        public static let issuerMismatch = Code(rawValue: "issuer_mismatch")
    }

    public var code: Code
    /// The server's `error_description`, printable and scrubbed.
    public var errorDescription: String?

    public init(_ code: Code, description: String? = nil) {
        self.code = code
        self.errorDescription = description.map { ProblemDetails.printable($0, limit: 300) }
    }

    /// The error in an answer's JSON body, if it has one; `secrets` are replaced in its description.
    init?(answer body: Data, secrets: [String]) {
        struct Answer: Decodable {
            let error: String
            let error_description: String?
        }
        guard let answer = try? JSONDecoder().decode(Answer.self, from: body), !answer.error.isEmpty else { return nil }
        var text = answer.error_description
        for secret in secrets.sorted(by: { $0.count > $1.count }) where secret.count >= 4 {
            text = text?.replacingOccurrences(of: secret, with: "<redacted>")
        }
        self.init(Code(rawValue: ProblemDetails.printable(answer.error, limit: 64)), description: text)
    }

    /// "invalid_grant: the refresh token was revoked".
    public var description: String {
        errorDescription.map { "\(code): \($0)" } ?? code.rawValue
    }
}

extension CatenaError {
    /// The OAuth 2 error underneath, when an OAuth server refused or a check of the
    /// client's failed.
    public var oauth: OAuth2Error? {
        underlyingError as? OAuth2Error ?? (underlyingError as? CatenaError)?.oauth
    }
}

/// A token endpoint's success answer (RFC 6749 §5.1), checked as hostile input.
struct TokenAnswer: Decodable {
    let access_token: String
    let token_type: String?
    let refresh_token: String?
    let expires_in: Double?
    let scope: String?

    private enum CodingKeys: String, CodingKey { case access_token, token_type, refresh_token, expires_in, scope }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        access_token = try container.decode(String.self, forKey: .access_token)
        token_type = try container.decodeIfPresent(String.self, forKey: .token_type)
        refresh_token = try container.decodeIfPresent(String.self, forKey: .refresh_token)
        scope = try container.decodeIfPresent(String.self, forKey: .scope)
        // Some servers send the lifetime as a string.
        if let seconds = try? container.decodeIfPresent(Double.self, forKey: .expires_in) {
            expires_in = seconds
        } else {
            expires_in = (try? container.decodeIfPresent(String.self, forKey: .expires_in)).flatMap { $0.flatMap(Double.init) }
        }
    }

    /// The token in `response`; fails when a value could not be sent back in a header
    /// or is not a bearer token.
    static func token(from response: APIResponse, for request: APIRequest, clock: any RetryClock) throws(CatenaError) -> BearerToken {
        let answer = try response.decode(TokenAnswer.self)
        func invalid(_ detail: String) -> CatenaError { CatenaError(.invalidResponse, request: request, response: response, detail: detail) }
        guard isTokenText(answer.access_token) else { throw invalid("the access_token is empty, longer than 16 KiB or has characters a header cannot carry") }
        if let refresh = answer.refresh_token, !isTokenText(refresh) {
            throw invalid("the refresh_token is empty, longer than 16 KiB or has characters a form cannot carry")
        }
        if let type = answer.token_type, type.lowercased() != "bearer" {
            throw invalid("the token_type is \(ProblemDetails.printable(type, limit: 40)), not Bearer")
        }
        // A year at most; a negative or non-finite lifetime means the token is already spent.
        let lifetime = answer.expires_in.map { $0.isFinite ? min(max($0, 0), 365 * 86_400) : 0 }
        return BearerToken(
            accessToken: answer.access_token, refreshToken: answer.refresh_token,
            expiresAt: lifetime.map { clock.now().addingTimeInterval($0) },
            scope: answer.scope.map { ProblemDetails.printable($0, limit: 1000) })
    }

    /// Visible ASCII only, 1 to 16 KiB: what RFC 6750's b64token and every real token fits.
    static func isTokenText(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 16 * 1024 && text.utf8.allSatisfy { (0x21...0x7E).contains($0) }
    }
}
