public import Foundation

/// How a ``TokenAuthMiddleware`` for an ``OAuth2Client`` gets a token when it has none
/// and cannot refresh: for flows that need no person, such as client credentials. An
/// interactive flow (device, authorization code) signs in before the chain is used and
/// hands the middleware its token or storage instead.
public struct OAuth2SignIn: Sendable {
    let run: @Sendable (OAuth2Client) async throws -> BearerToken

    /// Signs in with `run`.
    public init(_ run: @escaping @Sendable (OAuth2Client) async throws -> BearerToken) {
        self.run = run
    }

    /// The client credentials grant: a new token whenever the old one expires.
    ///
    /// - Parameters:
    ///   - scopes: the scopes asked for.
    ///   - audience: the API the token is for (`audience`).
    ///   - resources: the APIs the token is for (RFC 8707 `resource`).
    public static func clientCredentials(scopes: [String] = [], audience: String? = nil, resources: [URL] = []) -> OAuth2SignIn {
        OAuth2SignIn { client in try await client.clientCredentials(scopes: scopes, audience: audience, resources: resources) }
    }
}

extension TokenAuthMiddleware {
    /// Bearer tokens from an OAuth 2 server, for requests to `hosts`.
    ///
    /// - The token comes from `token`, else once from `storage`, else from `signIn`.
    /// - An expired token is renewed by the refresh-token grant; a rotated refresh token
    ///   is saved before any request uses the new access token. A refresh token the
    ///   server refuses (`invalid_grant`) is removed from `storage`, and `signIn` runs
    ///   again when there is one; without one the request fails with
    ///   ``CatenaError/Code/authenticationFailed``: sign in again.
    /// - However many requests need a new token, one token request runs (see
    ///   ``TokenAuthMiddleware``).
    /// - `reset()` (logout) removes the token from `storage` and revokes it at the
    ///   server's revocation endpoint, if it has one (RFC 7009); a failed revocation
    ///   does not stop the logout. A refresh still running then saves nothing.
    ///
    /// - Parameters:
    ///   - hosts: the origins that may receive the token: `"host"` (default port) or `"host:port"`.
    ///   - allowHTTP: send the token over plain http to hosts that are not loopback.
    ///   - client: the OAuth 2 client that refreshes and revokes.
    ///   - signIn: how to get a token when there is none, for flows without a person.
    ///   - storage: where tokens are kept between runs.
    ///   - storageKey: the name the token is kept under.
    ///   - token: a token to start with, such as one a device or browser sign-in returned.
    ///   - leeway: a token this close to its expiry counts as expired.
    ///   - clock: the time, for expiry.
    public init(
        hosts: Set<String>, allowHTTP: Bool = false, client: OAuth2Client, signIn: OAuth2SignIn? = nil, storage: (any TokenStorage)? = nil,
        storageKey: String = "default", token: BearerToken? = nil, leeway: Duration = .seconds(5), clock: any RetryClock = SystemRetryClock()
    ) {
        let keeper = OAuth2TokenKeeper(client: client, signIn: signIn, storage: storage, name: storageKey, leeway: leeway, clock: clock)
        if let token, let storage { try? storage.save(token, named: storageKey) }
        self.init(hosts: hosts, allowHTTP: allowHTTP, token: token, leeway: leeway, clock: clock, keeper: keeper)
    }
}

/// An OAuth middleware's token source: storage read and written under its lock, so that
/// two processes sharing a token (two runs of a command) never spend one refresh token
/// twice, and logout revoking. Saves and removals are ordered by `epoch` under one lock,
/// so a refresh that a logout overtook can never write its token back.
final class OAuth2TokenKeeper: Sendable {
    private let client: OAuth2Client
    private let signIn: OAuth2SignIn?
    private let storage: (any TokenStorage)?
    private let name: String
    private let leeway: Duration
    private let clock: any RetryClock
    /// Bumped by every logout.
    private let epoch = Locked<UInt64>(0)

    init(client: OAuth2Client, signIn: OAuth2SignIn?, storage: (any TokenStorage)?, name: String, leeway: Duration, clock: any RetryClock) {
        self.client = client
        self.signIn = signIn
        self.storage = storage
        self.name = name
        self.leeway = leeway
        self.clock = clock
    }

    func refresh(_ current: BearerToken?) async throws -> BearerToken {
        // A logout cancels the refresh's task before it bumps the epoch: a task that
        // starts only after that is cancelled already, and asks for nothing.
        let started = epoch.withLock { $0 }
        try Task.checkCancellation()
        guard let storage else { return try await renew(current, epoch: started) }
        return try await storage.withExclusiveAccess(named: name) {
            // Another process, or another middleware, may have renewed the token meanwhile.
            let stored: BearerToken?
            do {
                stored = try storage.token(named: name)
            } catch {
                throw CatenaError(
                    .authenticationFailed, request: APIRequest(url: client.endpoints.token), underlyingError: error, detail: "the stored token cannot be read")
            }
            if let stored, current == nil || stored.accessToken != current?.accessToken {
                if isFresh(stored) {
                    guard epoch.withLock({ $0 }) == started, !Task.isCancelled else { throw CancellationError() }
                    return stored
                }
                return try await renew(stored, epoch: started)
            }
            return try await renew(current, epoch: started)
        }
    }

    private func isFresh(_ token: BearerToken) -> Bool {
        token.expiresAt.map { $0.timeIntervalSince(clock.now()) > leeway.seconds } ?? true
    }

    /// A new token: refreshed when `current` has a refresh token the server takes, else
    /// from `signIn`.
    private func renew(_ current: BearerToken?, epoch started: UInt64) async throws -> BearerToken {
        if let token = current, token.refreshToken != nil {
            do {
                return try keep(try await client.refresh(token), epoch: started)
            } catch let error as CatenaError where error.oauth?.code == .invalidGrant {
                // The refresh token is spent or revoked: it will never work again.
                try? epoch.withLock { now in
                    if now == started, let storage, try storage.token(named: name)?.refreshToken == token.refreshToken {
                        try storage.removeToken(named: name)
                    }
                }
                if signIn == nil { throw error }
            }
        }
        guard let signIn else {
            throw CatenaError(
                .authenticationFailed, request: APIRequest(url: client.endpoints.token), detail: "not signed in, or the sign-in has expired: sign in again")
        }
        return try keep(try await signIn.run(client), epoch: started)
    }

    /// Saves `token` unless a logout came since `started` or cancelled this refresh;
    /// such a token is revoked instead. A token that cannot be saved is still used by
    /// this process (its predecessor may be spent already); the next run signs in again.
    private func keep(_ token: BearerToken, epoch started: UInt64) throws -> BearerToken {
        let current = epoch.withLock { now -> Bool in
            guard now == started, !Task.isCancelled else { return false }
            try? storage?.save(token, named: name)
            return true
        }
        guard current else {
            let client = client
            Task { try? await client.revoke(token) }
            throw CancellationError()
        }
        return token
    }

    /// The first half of a logout, before the middleware forgets its token: from now on
    /// no refresh saves or returns a token, and the stored one is removed (returned, to
    /// be revoked).
    func signOut() -> BearerToken? {
        epoch.withLock { epoch -> BearerToken? in
            epoch &+= 1
            let stored = try? storage?.token(named: name)
            try? storage?.removeToken(named: name)
            return stored
        }
    }

    /// The second half: removes the stored token again under the storage's lock (another
    /// process may have saved one meanwhile), then revokes what it found and `token`,
    /// waiting at most 10 s for the server; the revocation goes on if the caller is
    /// cancelled.
    func revoke(_ token: BearerToken?, stored: BearerToken?) async {
        var found = [token, stored]
        if let storage {
            let name = name
            let late = try? await storage.withExclusiveAccess(named: name) { () throws -> BearerToken? in
                defer { try? storage.removeToken(named: name) }
                return try storage.token(named: name)
            }
            found.append(late ?? nil)
        }
        var tokens: [BearerToken] = []
        for case let token? in found where !tokens.contains(where: { $0.refreshToken == token.refreshToken && $0.accessToken == token.accessToken }) {
            tokens.append(token)
        }
        guard client.endpoints.revocation != nil, !tokens.isEmpty else { return }
        let client = client
        let revocation = Task {
            for token in tokens { try? await client.revoke(token) }
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await revocation.value }
            group.addTask { try? await Task.sleep(for: .seconds(10)) }
            await group.next()
            group.cancelAll()
        }
    }
}
