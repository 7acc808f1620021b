public import Foundation
import HTTPTypes

/// An OAuth 2 client of one authorization server: who the app is (``clientID`` and how
/// it authenticates) and where the server's endpoints are. The flows are its methods:
///
/// - ``clientCredentials(scopes:audience:resources:parameters:)`` for server-to-server calls;
/// - ``authorizationRequest(redirectURI:scopes:parameters:)`` and ``exchange(_:for:)``
///   (authorization code with PKCE), or ``signInWithLoopback(scopes:port:timeout:open:)``;
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
        /// Whether the server puts its issuer in every authorization redirect (RFC 9207,
        /// `authorization_response_iss_parameter_supported`): then a redirect without
        /// `iss` is refused as a possible mix-up.
        public var issuerInRedirects: Bool

        public init(
            issuer: URL? = nil, token: URL, authorization: URL? = nil, deviceAuthorization: URL? = nil, revocation: URL? = nil,
            issuerInRedirects: Bool = false
        ) {
            self.issuer = issuer
            self.token = token
            self.authorization = authorization
            self.deviceAuthorization = deviceAuthorization
            self.revocation = revocation
            self.issuerInRedirects = issuerInRedirects
        }

        private enum CodingKeys: String, CodingKey { case issuer, token, authorization, deviceAuthorization, revocation, issuerInRedirects }

        /// Reads endpoints saved before ``issuerInRedirects`` existed, too.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            issuer = try container.decodeIfPresent(URL.self, forKey: .issuer)
            token = try container.decode(URL.self, forKey: .token)
            authorization = try container.decodeIfPresent(URL.self, forKey: .authorization)
            deviceAuthorization = try container.decodeIfPresent(URL.self, forKey: .deviceAuthorization)
            revocation = try container.decodeIfPresent(URL.self, forKey: .revocation)
            issuerInRedirects = try container.decodeIfPresent(Bool.self, forKey: .issuerInRedirects) ?? false
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

    /// Reads the server's metadata and makes a client with its endpoints: RFC 8414's
    /// `/.well-known/oauth-authorization-server` (inserted before the issuer's path)
    /// first, then OpenID Connect Discovery's `ISSUER/.well-known/openid-configuration`
    /// (appended after it), which most OpenID providers publish alone (RFC 8414 §5).
    /// Fails with ``CatenaError/Code/authenticationFailed`` when the metadata names
    /// another issuer (a server may not speak for another), and with
    /// ``CatenaError/Code/invalidResponse`` when it lacks a token endpoint.
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
        let urls = try metadataURLs(for: issuer)
        var url = urls.oauth
        var request = APIRequest(.get, url: url, headerFields: [.accept: "application/json"])
        request[option: MaximumResponseSize.self] = maximumAnswer
        var response: APIResponse
        do {
            response = try await loader.load(request)
        } catch let error where error.response.map({ (400..<500).contains($0.status.code) }) == true {
            response = error.response!  // a validating loader's 404
        }
        // Not there (404, or a 400/405 from a server that routes nothing at that path): the OpenID place.
        if (400..<500).contains(response.status.code) {
            url = urls.openID
            request = APIRequest(.get, url: url, headerFields: [.accept: "application/json"])
            request[option: MaximumResponseSize.self] = maximumAnswer
            response = try await loader.load(request)
        }
        _ = try response.validateStatus()
        struct Metadata: Decodable {
            let issuer: String?
            let token_endpoint: String?
            let authorization_endpoint: String?
            let device_authorization_endpoint: String?
            let revocation_endpoint: String?
            let authorization_response_iss_parameter_supported: Bool?
        }
        let metadata = try response.decode(Metadata.self)
        // RFC 8414 §3.3 (and OpenID Connect Discovery §4.3): the issuer in the metadata must be the one asked for.
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
            revocation: try endpoint(metadata.revocation_endpoint, "revocation_endpoint"),
            issuerInRedirects: metadata.authorization_response_iss_parameter_supported ?? false)
        return OAuth2Client(clientID: clientID, authentication: authentication, endpoints: endpoints, loader: loader, clock: clock)
    }

    /// RFC 8414 §3.1: the well-known part goes between the host and the issuer's path.
    static func metadataURL(for issuer: URL) throws(CatenaError) -> URL {
        try metadataURLs(for: issuer).oauth
    }

    /// RFC 8414 §3.1's place (the well-known part between the host and the issuer's
    /// path), and OpenID Connect Discovery §4's (appended to the issuer).
    static func metadataURLs(for issuer: URL) throws(CatenaError) -> (oauth: URL, openID: URL) {
        guard var components = URLComponents(url: issuer, resolvingAgainstBaseURL: false), issuer.host != nil, isSafe(issuer),
            components.query == nil, components.fragment == nil
        else {
            throw CatenaError(.invalidRequest, request: APIRequest(url: issuer), detail: "the issuer must be an https URL without query or fragment")
        }
        let path = components.percentEncodedPath
        let trimmedPath = path.hasSuffix("/") ? String(path.dropLast()) : path
        components.percentEncodedPath = "/.well-known/oauth-authorization-server" + (path == "/" ? "" : path)
        let oauth = components.url!
        components.percentEncodedPath = trimmedPath + "/.well-known/openid-configuration"
        return (oauth, components.url!)
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
        if let error = OAuth2Error(answer: response.body, secretsOf: request) {
            throw CatenaError(.authenticationFailed, request: request, response: response, underlyingError: error, detail: "the server answered \(error)")
        }
        // Real providers refuse with an empty (or HTML) 400, 401 or 403: a refusal all the same.
        if (400..<500).contains(response.status.code) {
            throw CatenaError(
                .authenticationFailed, request: request, response: response,
                detail:
                    "the server refused with \(response.status.code) \(ProblemDetails.printable(response.status.reasonPhrase, limit: 40)) and no OAuth error")
        }
        _ = try response.validateStatus()
        return (request, response)
    }

    static func formEncoded(_ text: String) -> String {
        PercentEncoding.encode(text, allowing: PercentEncoding.queryComponent, spaceAsPlus: true)
    }
}
