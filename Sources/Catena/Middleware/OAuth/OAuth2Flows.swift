public import Foundation

// MARK: Client credentials

extension OAuth2Client {
    /// A token for the client itself (RFC 6749 §4.4), for server-to-server calls; the
    /// client should authenticate (`clientSecretBasic` or `clientSecretPost`).
    ///
    /// - Parameters:
    ///   - scopes: the scopes asked for; none leaves the server's default.
    ///   - audience: the API the token is for, as Auth0 and Okta ask (`audience`).
    ///   - resources: the APIs the token is for, as RFC 8707 asks (`resource`, repeated).
    ///   - parameters: further form fields the server wants.
    public func clientCredentials(
        scopes: [String] = [], audience: String? = nil, resources: [URL] = [], parameters: [(name: String, value: String)] = []
    ) async throws(CatenaError) -> BearerToken {
        var fields: [(name: String, value: String)] = [("grant_type", "client_credentials")]
        if !scopes.isEmpty { fields.append(("scope", scopes.joined(separator: " "))) }
        if let audience { fields.append(("audience", audience)) }
        fields += resources.map { ("resource", $0.absoluteString) }
        return try await requestToken(fields + parameters)
    }
}

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
        items += parameters.map { URLQueryItem(name: $0.name, value: $0.value) }
        // `+` stays literal in URLComponents' query, and a form decoder reads it as a space.
        components.percentEncodedQuery = items.map { Self.formEncoded($0.name) + "=" + Self.formEncoded($0.value ?? "") }.joined(separator: "&")
        return OAuth2AuthorizationRequest(url: components.url!, redirectURI: redirectURI, state: state, codeVerifier: verifier)
    }

    /// Exchanges the code in `redirect`, the URL the browser was sent back to, for a
    /// token. Checks first that `redirect` carries `request`'s `state` (compared in
    /// constant time) and, when the server names itself (RFC 9207 `iss`), that it is
    /// this client's issuer. A redirect with `error` fails with that ``OAuth2Error``.
    public func exchange(_ redirect: URL, for request: OAuth2AuthorizationRequest) async throws(CatenaError) -> BearerToken {
        let failed = APIRequest(url: request.redirectURI)
        let items = URLComponents(url: redirect, resolvingAgainstBaseURL: false)?.queryItems ?? []
        func value(_ name: String) -> String? { items.first { $0.name == name }?.value }
        // A parameter given twice could be read two ways: the redirect is treated as forged.
        let repeated = ["state", "code", "iss", "error"].contains { name in items.filter { $0.name == name }.count > 1 }
        guard !repeated, let state = value("state"), Self.constantTimeEqual(state, request.state) else {
            throw CatenaError(
                .authenticationFailed, request: failed, underlyingError: OAuth2Error(.stateMismatch),
                detail: "the redirect's state is not the one sent: it may be forged, so its code was not used")
        }
        if let issuer = value("iss"), let expected = endpoints.issuer, issuer != expected.absoluteString {
            throw CatenaError(
                .authenticationFailed, request: failed, underlyingError: OAuth2Error(.issuerMismatch),
                detail: "the redirect comes from another issuer (a mix-up), so its code was not used")
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
    /// 127.0.0.1 on a free port, calls `open` with the authorization URL, waits for the
    /// one redirect, then exchanges its code. The client must be registered with an
    /// `http://127.0.0.1` redirect URI (any port).
    ///
    /// - Parameters:
    ///   - scopes: the scopes asked for.
    ///   - timeout: how long the user may take.
    ///   - open: shows the URL: opens a browser, or prints it.
    public func signInWithLoopback(
        scopes: [String] = [], timeout: Duration = .seconds(300), open: @Sendable (URL) async throws -> Void
    ) async throws(CatenaError) -> BearerToken {
        let listener = try LoopbackRedirectListener()
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

// MARK: Device authorization grant

/// What the user must do to approve a device (RFC 8628 §3.2): visit
/// ``verificationURI`` and enter ``userCode``. Show both, then call
/// ``OAuth2Client/token(for:)``. The device code itself is kept out of its description.
public struct OAuth2DeviceAuthorization: Sendable, CustomStringConvertible {
    /// The code the user types, as the server sent it (at most 64 visible characters).
    public let userCode: String
    /// Where the user goes to type it.
    public let verificationURI: URL
    /// The same with the code filled in, if the server offers one (for a QR code).
    public let verificationURIComplete: URL?
    /// When the device code stops working: the server's `expires_in`, at most an hour.
    public let expiresAt: Date
    /// How long to wait between polls: the server's `interval` (5 s when it gives none),
    /// between 1 s and 60 s.
    public let interval: Duration
    let deviceCode: String

    public var description: String { "OAuth2DeviceAuthorization(visit \(verificationURI.absoluteString), enter \(userCode))" }
}

extension OAuth2Client {
    /// Starts the device authorization grant (RFC 8628 §3.1): asks the server for a
    /// device code and the user code to show.
    ///
    /// - Parameters:
    ///   - scopes: the scopes asked for.
    ///   - parameters: further form fields the server wants.
    public func authorizeDevice(scopes: [String] = [], parameters: [(name: String, value: String)] = []) async throws(CatenaError) -> OAuth2DeviceAuthorization
    {
        guard let url = endpoints.deviceAuthorization else {
            throw CatenaError(.invalidRequest, request: APIRequest(url: endpoints.token), detail: "the server has no device authorization endpoint")
        }
        var fields = parameters
        if !scopes.isEmpty { fields.insert(("scope", scopes.joined(separator: " ")), at: 0) }
        let (request, response) = try await post(url, fields)
        struct Answer: Decodable {
            let device_code: String
            let user_code: String
            let verification_uri: String?
            let verification_url: String?  // Google's spelling
            let verification_uri_complete: String?
            let expires_in: Double
            let interval: Double?
        }
        let answer = try response.decode(Answer.self)
        func invalid(_ detail: String) -> CatenaError { CatenaError(.invalidResponse, request: request, response: response, detail: detail) }
        guard TokenAnswer.isTokenText(answer.device_code) else { throw invalid("the device_code is empty, too long or not visible ASCII") }
        guard !answer.user_code.isEmpty, answer.user_code.count <= 64, answer.user_code.unicodeScalars.allSatisfy({ (0x20...0x7E).contains($0.value) })
        else { throw invalid("the user_code is empty, longer than 64 characters or not printable ASCII") }
        func webURL(_ text: String?) -> URL? {
            guard let text, text.utf8.count <= 2048, let url = URL(string: text), ["https", "http"].contains(url.scheme?.lowercased()), url.host != nil
            else { return nil }
            return url
        }
        guard let verification = webURL(answer.verification_uri ?? answer.verification_url) else {
            throw invalid("the verification_uri is missing or not an http(s) URL")
        }
        let lifetime = answer.expires_in.isFinite ? min(max(answer.expires_in, 1), 3600) : 1
        let interval = answer.interval.map { $0.isFinite ? min(max($0, 1), 60) : 5 } ?? 5
        return OAuth2DeviceAuthorization(
            userCode: answer.user_code, verificationURI: verification, verificationURIComplete: webURL(answer.verification_uri_complete),
            expiresAt: clock.now().addingTimeInterval(lifetime), interval: .milliseconds(Int(interval * 1000)), deviceCode: answer.device_code)
    }

    /// Polls the token endpoint until the user approves `device` (RFC 8628 §3.4–3.5):
    /// waits ``OAuth2DeviceAuthorization/interval`` between polls, 5 s longer after each
    /// `slow_down`, and twice as long after a poll that could not connect. Fails with
    /// `access_denied` when the user declines and `expired_token` when the device code
    /// expires (the server's word or the client's own deadline), and with
    /// ``CatenaError/Code/cancelled`` when the calling task is cancelled.
    public func token(for device: OAuth2DeviceAuthorization) async throws(CatenaError) -> BearerToken {
        var interval = device.interval
        let request = APIRequest(.post, url: endpoints.token)
        while true {
            do {
                try await clock.sleep(for: interval)
            } catch {
                throw CatenaError(.cancelled, request: request, detail: "cancelled while waiting for the user to approve the device")
            }
            guard clock.now() < device.expiresAt else {
                throw CatenaError(
                    .authenticationFailed, request: request,
                    underlyingError: OAuth2Error(.expiredToken, description: "the device code expired before it was approved"),
                    detail: "the device code expired before it was approved")
            }
            do {
                return try await requestToken([("grant_type", "urn:ietf:params:oauth:grant-type:device_code"), ("device_code", device.deviceCode)])
            } catch {
                switch error.oauth?.code {
                case .authorizationPending?: continue
                case .slowDown?: interval = min(interval + .seconds(5), .seconds(300))
                default:
                    guard [.cannotConnect, .timedOut, .connectionLost].contains(error.code) else { throw error }
                    interval = min(interval * 2, .seconds(300))
                }
            }
        }
    }

    /// The device flow in one call: ``authorizeDevice(scopes:parameters:)``, `show`
    /// (print the code and where to enter it), then ``token(for:)``.
    ///
    /// - Parameters:
    ///   - scopes: the scopes asked for.
    ///   - show: tells the user where to go and what to type.
    public func signInWithDevice(scopes: [String] = [], show: @Sendable (OAuth2DeviceAuthorization) async -> Void) async throws(CatenaError) -> BearerToken {
        let device = try await authorizeDevice(scopes: scopes)
        await show(device)
        return try await token(for: device)
    }
}
