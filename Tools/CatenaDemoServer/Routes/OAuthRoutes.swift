#if DemoServer
import Catena
import Crypto
import Foundation
import Hummingbird
import NIOCore

/// A small OAuth 2 authorization server, for testing and showing OAuth clients.
///
/// A `client_id` is a registered base, then optionally `.`-separated words: a word that
/// names a mode turns it on, any other is a tag (so that a test gets counts of its own
/// from `/oauth/stats?client=`). Bases:
/// - `catena-cli`: public. Authorization code with PKCE S256, device code, refresh
///   token; redirect URIs are loopback `http` ones only, on any port (RFC 8252 §7.3).
/// - `catena-service`: confidential, secret `catena-service-secret`. Client credentials.
///
/// Modes: `wrong-state` (the authorization redirect carries another state), `slow` (each
/// token-endpoint answer waits 1.5 s), `slow-down` (device polls answer slow_down, then
/// authorization_pending, then the token), `expired` (device codes live 2 s and every
/// poll answers expired_token), `denied` (device polls answer access_denied).
///
/// Besides, the password grant of the password-flow tests: a known user's email with any
/// non-empty password, no client. `expires_in` (0…3600 s, default 60) in a token request
/// sets the access token's lifetime whatever the grant.
enum OAuthRoutes {
    typealias Context = DemoRoutes.Context

    /// Entries each table keeps at most, so that a long-running `catena serve` stays small.
    static let tableLimit = 10_000
    static let deviceGrant = "urn:ietf:params:oauth:grant-type:device_code"
    static let scopes: Set<String> = ["read", "write"]
    /// Who approves every authorization request.
    static let demoUser = "janet.weaver@reqres.in"

    /// Adds the routes; returns whether a bearer token is one they issued and still honour.
    @discardableResult
    static func add(to router: Router<Context>, scheme: String = "http") -> @Sendable (String) -> Bool {
        let state = State()

        // RFC 8414 metadata. The hostile issuer (the §3.1 path form for `<origin>/hostile-issuer`)
        // names another issuer than the one it was fetched for: a client must refuse it (§3.3).
        router.get(".well-known/oauth-authorization-server") { request, _ in
            try DemoRoutes.json(Metadata(issuer: origin(of: request, scheme: scheme), origin: origin(of: request, scheme: scheme)))
        }
        router.get(".well-known/oauth-authorization-server/hostile-issuer") { request, _ in
            try DemoRoutes.json(Metadata(issuer: "https://evil.example", origin: origin(of: request, scheme: scheme)))
        }

        router.get("oauth/authorize") { request, _ in
            let query = request.uri.queryParameters
            // Client and redirect URI first, and their errors never redirect: else the server
            // would send users wherever a link says (RFC 6749 §4.1.2.1).
            guard let client = query.get("client_id").flatMap(Client.init(id:)), client.grants.contains("authorization_code") else {
                return plainText("unknown client_id, or one that may not use the authorization code grant", status: .badRequest)
            }
            guard let redirectURI = query.get("redirect_uri"), isLoopback(redirectURI) else {
                return plainText("redirect_uri must be http://127.0.0.1, http://[::1] or http://localhost, any port and path", status: .badRequest)
            }
            let echoedState = client.modes.contains(.wrongState) ? randomToken() : query.get("state")
            let issuer = origin(of: request, scheme: scheme)
            func back(_ fields: [(String, String?)]) -> Response {
                redirect(to: redirectURI, fields + [("state", echoedState), ("iss", issuer)])
            }
            guard query.get("response_type") == "code" else { return back([("error", "unsupported_response_type")]) }
            guard let challenge = query.get("code_challenge"), isMade(challenge, of: "-_"), query.get("code_challenge_method") == "S256" else {
                return back([("error", "invalid_request"), ("error_description", "PKCE with S256 is required")])
            }
            guard let scope = parseScope(query.get("scope")) else { return back([("error", "invalid_scope")]) }
            let code = randomToken()
            let expires = Date().addingTimeInterval(60)
            let grant = Grant(subject: demoUser, client: client.id, scope: scope, family: code)
            // Kept 10 min past expiry, so that a late replay still revokes what the code gave.
            let entry = Code(grant: grant, redirectURI: redirectURI, challenge: challenge, expires: expires)
            state.tables.withLock { $0.codes.insert(entry, for: code, keep: expires.addingTimeInterval(600)) }
            return back([("code", code)])
        }

        router.post("oauth/token") { request, _ in
            let form = try await Form(request)
            let lifetime = try number(form["expires_in"], named: "expires_in", in: 0...3600, default: 60)
            let presented = credentials(request, form)
            if let id = presented?.id, Client(id: id)?.modes.contains(.slow) == true { try await Task.sleep(for: .seconds(1.5)) }
            do {
                var response = try DemoRoutes.json(try token(form, presented, lifetime: lifetime, state: state))
                response.headers[.cacheControl] = "no-store"
                return response
            } catch let error as OAuthError {
                state.count(\.invalid, client: presented?.id)
                if error.reuse { state.count(\.refreshReuse, client: presented?.id) }
                throw error
            }
        }

        // RFC 8628 device authorization; the server approves each device by itself.
        router.post("oauth/device") { request, _ in
            let form = try await Form(request)
            let client = try authenticate(credentials(request, form), for: deviceGrant)
            guard let scope = parseScope(form["scope"]) else { throw OAuthError("invalid_scope", "scopes are read and write") }
            let letters = Array("BCDFGHJKLMNPQRSTVWXZ")  // RFC 8628 §6.1: no vowels, no look-alikes
            let half = { String((0..<4).map { _ in letters.randomElement()! }) }
            let userCode = half() + "-" + half()
            let deviceCode = randomToken()
            let lifetime: TimeInterval = client.modes.contains(.expired) ? 2 : 600
            let expires = Date().addingTimeInterval(lifetime)
            let device = Device(client: client.id, scope: scope, expires: expires)
            state.tables.withLock { $0.devices.insert(device, for: deviceCode, keep: expires.addingTimeInterval(600)) }
            let verify = origin(of: request, scheme: scheme) + "/oauth/device/verify"
            // interval 1 rather than RFC 8628's default 5 s, so that demos are quick.
            let answer = DeviceAuthorization(
                device_code: deviceCode, user_code: userCode, verification_uri: verify, verification_uri_complete: "\(verify)?user_code=\(userCode)",
                expires_in: Int(lifetime), interval: 1)
            var response = try DemoRoutes.json(answer)
            response.headers[.cacheControl] = "no-store"
            return response
        }
        router.get("oauth/device/verify") { _, _ in
            plainText("This demo server approves every device by itself: go back to your device, it is signed in.\n", status: .ok)
        }

        // RFC 7009. A refresh token takes its family's tokens with it; an access token goes
        // alone. An unknown or already revoked token is answered 200 too (§2.2), and every
        // 200 counts, so that a client's sign-out shows as its two requests.
        router.post("oauth/revoke") { request, _ in
            let form = try await Form(request)
            let presented = credentials(request, form)
            let client = try presented.map { try authenticate($0, for: nil) }
            guard let token = form["token"] else { throw OAuthError("invalid_request", "token is missing") }
            try state.tables.withLock { tables in
                let refresh = tables.refresh[token]
                guard let grant = refresh?.grant ?? tables.access[token] else { return }
                guard grant.client == client?.id else { throw OAuthError("unauthorized_client", "the token is another client's") }
                if refresh != nil { tables.revoke(family: grant.family) } else { tables.access[token] = nil }
            }
            state.count(\.revoked, client: client?.id)
            return Response(status: .ok, headers: [.cacheControl: "no-store"])
        }

        // Ends an access token's life now (form: token=...), as if its lifetime had passed.
        router.post("oauth/expire") { request, _ in
            guard let token = try await Form(request)["token"] else { throw OAuthError("invalid_request", "token is missing") }
            state.tables.withLock { $0.access[token] = nil }
            return Response(status: .noContent)
        }

        router.get("oauth/stats") { request, _ in
            let client = request.uri.queryParameters.get("client")
            return try DemoRoutes.json(state.counts.withLock { counts in client.map { counts.clients[$0] ?? Stats() } ?? counts.all })
        }

        // A resource that wants a live bearer token from /oauth/token.
        router.get("api/protected/me") { request, _ in
            let presented = request.headers[.authorization].flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil }
            guard let grant = presented.flatMap({ token in state.tables.withLock { $0.access[token] } }) else {
                var response = DemoRoutes.rawJSON(#"{"error":"invalid_token"}"#, status: .unauthorized)
                response.headers[.wwwAuthenticate] = #"Bearer error="invalid_token""#
                return response
            }
            var answer = ["email": grant.subject, "scope": grant.scope]
            answer["audience"] = grant.audience
            answer["client_id"] = grant.client
            return try DemoRoutes.json(answer)
        }

        // A resource that wants a scope no demo token has: 401 with RFC 6750's
        // insufficient_scope, which a new token cannot cure.
        router.get("api/protected/admin") { _, _ in
            var response = DemoRoutes.rawJSON(#"{"error":"insufficient_scope"}"#, status: .unauthorized)
            response.headers[.wwwAuthenticate] = #"Bearer realm="catena-demo", error="insufficient_scope", scope="admin""#
            return response
        }

        // A resource that refuses every token, fresh ones too (a key rotated at the
        // resource but not at the issuer): a client must not fetch a token per call.
        router.get("api/protected/refusing") { _, _ in
            var response = DemoRoutes.rawJSON(#"{"error":"invalid_token"}"#, status: .unauthorized)
            response.headers[.wwwAuthenticate] = #"Bearer error="invalid_token", error_description="signed with a retired key""#
            return response
        }
        return { token in state.tables.withLock { $0.access[token] != nil } }
    }

    // MARK: The token endpoint's grants

    static func token(_ form: Form, _ presented: Credentials?, lifetime: TimeInterval, state: State) throws -> Issued {
        switch form["grant_type"] ?? "" {
        case "password":
            // For the password-flow tests, which send no client: any client fields are ignored.
            guard let username = form["username"], UserStore.user(email: username) != nil, form["password"] != nil else {
                throw OAuthError("invalid_grant", "unknown user, or no password")
            }
            state.count(\.password, client: nil)
            let grant = Grant(subject: username, client: nil, scope: "read write", family: randomToken())
            return state.tables.withLock { $0.issue(grant, lifetime: lifetime, refreshable: true) }

        case "authorization_code":
            let client = try authenticate(presented, for: "authorization_code")
            guard let code = form["code"], let redirectURI = form["redirect_uri"], let verifier = form["code_verifier"] else {
                throw OAuthError("invalid_request", "code, redirect_uri and code_verifier are required")
            }
            // RFC 7636 §4.6: base64url(SHA-256(verifier)), unpadded, must be the challenge.
            let derived = isMade(verifier, of: "-._~") ? base64URL(Data(SHA256.hash(data: Data(verifier.utf8)))) : nil
            let issued = try state.tables.withLock { tables in
                guard let entry = tables.codes[code] else { throw OAuthError("invalid_grant", "unknown code") }
                if entry.redeemed {
                    // RFC 6749 §4.1.2: a code used twice revokes what it gave.
                    tables.revoke(family: entry.grant.family)
                    throw OAuthError("invalid_grant", "the code was used already; the tokens it gave are revoked")
                }
                guard entry.expires > Date() else { throw OAuthError("invalid_grant", "the code has expired") }
                guard entry.grant.client == client.id, entry.redirectURI == redirectURI else {
                    throw OAuthError("invalid_grant", "the code was issued to another client or redirect_uri")
                }
                guard derived == entry.challenge else { throw OAuthError("invalid_grant", "code_verifier does not match code_challenge") }
                tables.codes[code]?.redeemed = true
                return tables.issue(entry.grant, lifetime: lifetime, refreshable: true)
            }
            state.count(\.authorizationCode, client: client.id)
            return issued

        case "client_credentials":
            let client = try authenticate(presented, for: "client_credentials")
            guard let scope = parseScope(form["scope"]) else { throw OAuthError("invalid_scope", "scopes are read and write") }
            let grant = Grant(
                subject: client.id, client: client.id, scope: scope, family: randomToken(), audience: form["audience"], resource: form["resource"])
            state.count(\.clientCredentials, client: client.id)
            // RFC 6749 §4.4.3: no refresh token; the client can ask again.
            return state.tables.withLock { $0.issue(grant, lifetime: lifetime, refreshable: false) }

        case deviceGrant:
            let client = try authenticate(presented, for: deviceGrant)
            guard let deviceCode = form["device_code"] else { throw OAuthError("invalid_request", "device_code is missing") }
            state.count(\.devicePolls, client: client.id)
            let issued = try state.tables.withLock { tables in
                guard let device = tables.devices[deviceCode], device.client == client.id else { throw OAuthError("invalid_grant", "unknown device_code") }
                if client.modes.contains(.expired) || device.expires <= Date() { throw OAuthError("expired_token", "the device code has expired") }
                guard !device.spent else { throw OAuthError("invalid_grant", "the device code was used already") }
                if client.modes.contains(.denied) { throw OAuthError("access_denied", "the user said no") }
                tables.devices[deviceCode]?.polls += 1
                let waits = client.modes.contains(.slowDown) ? ["slow_down", "authorization_pending"] : ["authorization_pending"]
                if device.polls < waits.count { throw OAuthError(waits[device.polls], "the device is not approved yet") }
                tables.devices[deviceCode]?.spent = true
                let grant = Grant(subject: demoUser, client: client.id, scope: device.scope, family: deviceCode)
                return tables.issue(grant, lifetime: lifetime, refreshable: true)
            }
            state.count(\.deviceCode, client: client.id)
            return issued

        case "refresh_token":
            guard let token = form["refresh_token"] else { throw OAuthError("invalid_request", "refresh_token is missing") }
            // A token issued to a client must come from that client; the password grant's
            // have none and are taken without one.
            let needsClient = state.tables.withLock { $0.refresh[token]?.grant.client != nil }
            let client = try needsClient ? authenticate(presented, for: "refresh_token").id : nil
            let issued = try state.tables.withLock { tables in
                guard let entry = tables.refresh[token] else { throw OAuthError("invalid_grant", "unknown refresh token") }
                if entry.retired {
                    // RFC 9700 §4.14.2: a rotated-out token again means it leaked; end the family.
                    tables.revoke(family: entry.grant.family)
                    var error = OAuthError("invalid_grant", "the refresh token was used already; its family is revoked")
                    error.reuse = true
                    throw error
                }
                guard entry.grant.client == client else { throw OAuthError("invalid_grant", "the refresh token is another client's") }
                tables.refresh[token]?.retired = true
                return tables.issue(entry.grant, lifetime: lifetime, refreshable: true)
            }
            state.count(\.refresh, client: client)
            return issued

        case "":
            throw OAuthError("invalid_request", "grant_type is missing")
        default:
            throw OAuthError("unsupported_grant_type", "grants are password, authorization_code, client_credentials, device_code, refresh_token")
        }
    }
}
#endif  // DemoServer
