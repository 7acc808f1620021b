public import Foundation

// MARK: Authorization code with PKCE

/// One sign-in by the authorization code flow with PKCE (RFC 7636, S256): open ``url``
/// in a browser (or `ASWebAuthenticationSession`), then hand the redirect it ends on to
/// ``OAuth2Client/exchange(_:for:)``. It holds the code verifier, which never leaves
/// this process until the exchange; its description shows neither it nor the state.
public struct OAuth2AuthorizationRequest: Sendable, CustomStringConvertible {
    /// The authorization endpoint with every parameter: open it in a browser.
    public let url: URL
    /// Where the server sends the browser back.
    public let redirectURI: URL
    /// The random `state` the redirect must carry back.
    public let state: String
    /// The random `nonce` sent when `openid` is among the scopes (OpenID Connect Core
    /// §3.1.2.1; providers refuse a code request without one). Catena leaves the ID
    /// token alone: a user who reads it must check that its `nonce` claim is this.
    public let nonce: String?
    let codeVerifier: String

    public var description: String { "OAuth2AuthorizationRequest(redirect \(redirectURI.absoluteString))" }
}

extension OAuth2Client {
    /// A new authorization request: a fresh `state` and PKCE code verifier (32 random
    /// bytes each, from the system's secure generator) and the URL to open.
    ///
    /// - Parameters:
    ///   - redirectURI: the redirect URI registered for the client, such as a
    ///     ``LoopbackRedirectListener``'s or an app's custom scheme.
    ///   - scopes: the scopes asked for.
    ///   - parameters: further query items the server wants (`prompt`, `login_hint`).
    public func authorizationRequest(
        redirectURI: URL, scopes: [String] = [], parameters: [(name: String, value: String)] = []
    ) throws(CatenaError) -> OAuth2AuthorizationRequest {
        guard let endpoint = endpoints.authorization, var components = URLComponents(url: endpoint, resolvingAgainstBaseURL: false) else {
            throw CatenaError(.invalidRequest, request: APIRequest(url: endpoints.token), detail: "the server has no authorization endpoint")
        }
        guard Self.isSafe(endpoint) else {
            throw CatenaError(.invalidRequest, request: APIRequest(url: endpoint), detail: "OAuth endpoints must be https (or http to a loopback host)")
        }
        let state = Self.randomToken()
        let verifier = Self.randomToken()
        var items = components.queryItems ?? []
        items += [
            URLQueryItem(name: "response_type", value: "code"), URLQueryItem(name: "client_id", value: clientID),
            URLQueryItem(name: "redirect_uri", value: redirectURI.absoluteString), URLQueryItem(name: "state", value: state),
            URLQueryItem(name: "code_challenge", value: Self.base64URL(SHA256.hash(verifier.utf8))),
            URLQueryItem(name: "code_challenge_method", value: "S256"),
        ]
        if !scopes.isEmpty { items.append(URLQueryItem(name: "scope", value: scopes.joined(separator: " "))) }
        let nonce = scopes.contains("openid") && !parameters.contains { $0.name == "nonce" } ? Self.randomToken() : nil
        if let nonce { items.append(URLQueryItem(name: "nonce", value: nonce)) }
        items += parameters.map { URLQueryItem(name: $0.name, value: $0.value) }
        // `+` stays literal in URLComponents' query, and a form decoder reads it as a space.
        components.percentEncodedQuery = items.map { Self.formEncoded($0.name) + "=" + Self.formEncoded($0.value ?? "") }.joined(separator: "&")
        return OAuth2AuthorizationRequest(url: components.url!, redirectURI: redirectURI, state: state, nonce: nonce, codeVerifier: verifier)
    }

    /// Exchanges the code in `redirect`, the URL the browser was sent back to, for a
    /// token. Checks first that `redirect` carries `request`'s `state` (compared in
    /// constant time) and, when the server names itself (RFC 9207 `iss`), that it is
    /// this client's issuer. A redirect with `error` fails with that ``OAuth2Error``.
    public func exchange(_ redirect: URL, for request: OAuth2AuthorizationRequest) async throws(CatenaError) -> BearerToken {
        let failed = APIRequest(url: request.redirectURI)
        // The query is form-encoded: `+` is a space, read before percent-decoding (`%2B` is a plus).
        let items = (URLComponents(url: redirect, resolvingAgainstBaseURL: false)?.percentEncodedQueryItems ?? []).map { item in
            URLQueryItem(
                name: item.name.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? item.name,
                value: item.value.map { $0.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? $0 })
        }
        func value(_ name: String) -> String? { items.first { $0.name == name }?.value }
        // A parameter given twice could be read two ways: the redirect is treated as forged.
        let repeated = ["state", "code", "iss", "error"].contains { name in items.filter { $0.name == name }.count > 1 }
        guard !repeated, let state = value("state"), Self.constantTimeEqual(state, request.state) else {
            throw CatenaError(
                .authenticationFailed, request: failed, underlyingError: OAuth2Error(.stateMismatch),
                detail: "the redirect's state is not the one sent: it may be forged, so its code was not used")
        }
        // RFC 9207: a present `iss` is always compared; a server that says it sends one
        // and did not may be another server's redirect (a mix-up).
        if let issuer = value("iss"), issuer != endpoints.issuer?.absoluteString {
            throw CatenaError(
                .authenticationFailed, request: failed, underlyingError: OAuth2Error(.issuerMismatch),
                detail: endpoints.issuer == nil
                    ? "the redirect names an issuer, and this client knows none to compare it with (discover the endpoints, or give the issuer), so its code was not used"
                    : "the redirect comes from another issuer (a mix-up), so its code was not used")
        }
        if endpoints.issuerInRedirects, value("iss") == nil {
            throw CatenaError(
                .authenticationFailed, request: failed, underlyingError: OAuth2Error(.issuerMismatch),
                detail: "the redirect carries no iss, which this server says it always sends (RFC 9207), so its code was not used")
        }
        if let error = value("error") {
            let oauth = OAuth2Error(OAuth2Error.Code(rawValue: ProblemDetails.printable(error, limit: 64)), description: value("error_description"))
            throw CatenaError(.authenticationFailed, request: failed, underlyingError: oauth, detail: "the server answered \(oauth)")
        }
        guard let code = value("code"), !code.isEmpty else {
            throw CatenaError(.authenticationFailed, request: failed, detail: "the redirect carries no code")
        }
        return try await requestToken([
            ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", request.redirectURI.absoluteString),
            ("code_verifier", request.codeVerifier),
        ])
    }

    /// Signs in through a browser with a loopback redirect (RFC 8252 §7.3): listens on
    /// 127.0.0.1, calls `open` with the authorization URL, waits for the one redirect,
    /// then exchanges its code. The client must be registered with an
    /// `http://127.0.0.1` redirect URI (any port, or `port`'s).
    ///
    /// - Parameters:
    ///   - scopes: the scopes asked for.
    ///   - port: the port to listen on; 0 (the default) takes a free one. Give the
    ///     registered one for providers that compare redirect URIs exactly.
    ///   - timeout: how long the user may take.
    ///   - open: shows the URL: opens a browser, or prints it.
    public func signInWithLoopback(
        scopes: [String] = [], port: UInt16 = 0, timeout: Duration = .seconds(300), open: @Sendable (URL) async throws -> Void
    ) async throws(CatenaError) -> BearerToken {
        let listener = try LoopbackRedirectListener(port: port)
        defer { listener.close() }
        let request = try authorizationRequest(redirectURI: listener.redirectURI, scopes: scopes)
        // Listening before `open` runs: an `open` that waits for the page to load needs the answer.
        async let redirected = Self.redirect(from: listener, timeout: timeout, state: request.state)
        do {
            try await open(request.url)
        } catch {
            listener.close()
            _ = await redirected
            throw CatenaError.wrapping(error, request: APIRequest(url: request.redirectURI), code: .authenticationFailed, detail: "could not open the browser")
        }
        return try await exchange(try await redirected.get(), for: request)
    }

    private static func redirect(from listener: LoopbackRedirectListener, timeout: Duration, state: String) async -> Result<URL, CatenaError> {
        do {
            return .success(try await listener.redirect(timeout: timeout, expectingState: state))
        } catch {
            return .failure(error)
        }
    }

    /// 32 random bytes, base64url: 43 characters, as RFC 7636 §4.1 recommends.
    static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return base64URL((0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8)
        let y = Array(b.utf8)
        guard x.count == y.count else { return false }
        var difference: UInt8 = 0
        for index in x.indices { difference |= x[index] ^ y[index] }
        return difference == 0
    }
}
