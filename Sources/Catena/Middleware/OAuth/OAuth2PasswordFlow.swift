public import Foundation

/// Gets tokens from an OAuth 2 token endpoint (RFC 6749): the resource owner password
/// grant to log in, the refresh-token grant to renew. Use its ``refresh(_:)`` as a
/// ``TokenAuthMiddleware``'s refresh:
///
/// ```swift
/// let oauth = OAuth2PasswordFlow(tokenURL: url, username: "eve", password: "...", loader: transport)
/// let chain = TokenAuthMiddleware(hosts: ["api.example.com"], refresh: oauth.refresh) --> transport
/// ```
///
/// The token requests go through `loader`, which should not contain the TokenAuthMiddleware
/// itself. Credentials travel in the form body only, never in a URL or a log line.
///
/// Deprecated: the OAuth 2.0 Security Best Current Practice (RFC 9700 §2.4) says the
/// password grant MUST NOT be used, since it hands the user's password to the client
/// and cannot carry multi-factor sign-in. It stays for old servers; use
/// ``OAuth2Client`` with the device or authorization code flow instead.
@available(*, deprecated, message: "RFC 9700 §2.4: the password grant MUST NOT be used; sign in with OAuth2Client's device or authorization code flow")
public struct OAuth2PasswordFlow: Sendable {
    public let tokenURL: URL
    public let clientID: String?
    /// Form fields sent with every token request (a `scope`, say).
    public let extraParameters: [(name: String, value: String)]
    private let username: String
    private let password: String
    private let loader: any HTTPLoader
    private let clock: any RetryClock

    public init(
        tokenURL: URL, clientID: String? = nil, username: String, password: String, loader: any HTTPLoader,
        extraParameters: [(name: String, value: String)] = [], clock: any RetryClock = SystemRetryClock()
    ) {
        self.tokenURL = tokenURL
        self.clientID = clientID
        self.extraParameters = extraParameters
        self.username = username
        self.password = password
        self.loader = loader
        self.clock = clock
    }

    /// A new token: by the refresh-token grant when `current` has a refresh token and
    /// the server still accepts it, else by logging in again.
    public func refresh(_ current: BearerToken?) async throws -> BearerToken {
        if let refreshToken = current?.refreshToken {
            do {
                return try await grant([(name: "grant_type", value: "refresh_token"), (name: "refresh_token", value: refreshToken)])
            } catch let error as CatenaError where error.code == .unacceptableStatus && error.response?.status == .badRequest {
                // invalid_grant: the refresh token is spent or revoked; log in again.
            }
        }
        return try await grant([(name: "grant_type", value: "password"), (name: "username", value: username), (name: "password", value: password)])
    }

    private struct TokenResponse: Decodable {
        let access_token: String
        let refresh_token: String?
        let expires_in: Double?
    }

    private func grant(_ fields: [(name: String, value: String)]) async throws -> BearerToken {
        var fields = fields + extraParameters
        if let clientID { fields.append((name: "client_id", value: clientID)) }
        let request = APIRequest(.post, url: tokenURL, headerFields: [.accept: "application/json"], body: .form(fields))
        let token = try await loader.load(request).validateStatus().decode(TokenResponse.self)
        return BearerToken(
            accessToken: token.access_token, refreshToken: token.refresh_token,
            expiresAt: token.expires_in.map { clock.now().addingTimeInterval($0) })
    }
}
