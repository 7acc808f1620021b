public import Foundation
import HTTPTypes

extension CatenaError.Code {
    /// Credentials could not be had: a token refresh or a credentials provider failed.
    public static let authenticationFailed = CatenaError.Code(rawValue: "authentication failed")
}

/// Where an auth loader may send credentials: origins, not just hosts.
///
/// Each entry is `"host"` or `"host:port"` (`"[::1]:8080"` for IPv6). A bare host
/// matches the scheme's default port only (443, or 80 over http), so credentials
/// never reach another port of the same machine. Over plain http they go only to a
/// loopback host (`localhost`, `127.x.x.x`, `::1`), where the traffic never leaves the
/// machine, unless `allowsHTTP` says otherwise; to any other host the loader refuses
/// the request rather than sending a secret in clear text. A request to a configured
/// host on a port no entry names is refused too, with an error that says which port
/// to add. An entry that cannot be read (a port that is not a number in 1...65535)
/// matches nothing.
struct CredentialScope: Sendable {
    private struct Origin: Hashable {
        var host: String
        var port: Int?
    }

    private let origins: Set<Origin>
    let allowsHTTP: Bool

    init(_ entries: Set<String>, allowsHTTP: Bool) {
        self.allowsHTTP = allowsHTTP
        origins = Set(entries.compactMap(Self.parse))
    }

    private static func parse(_ entry: String) -> Origin? {
        let entry = entry.lowercased()
        if entry.hasPrefix("[") {  // [v6] or [v6]:port
            guard let close = entry.firstIndex(of: "]") else { return nil }
            let host = String(entry[entry.index(after: entry.startIndex)..<close])
            let rest = entry[entry.index(after: close)...]
            if rest.isEmpty { return Origin(host: host) }
            guard rest.hasPrefix(":"), let port = Int(rest.dropFirst()), (1...65535).contains(port) else { return nil }
            return Origin(host: host, port: port)
        }
        let parts = entry.split(separator: ":", omittingEmptySubsequences: false)
        switch parts.count {
        case 1: return entry.isEmpty ? nil : Origin(host: entry)
        case 2:
            guard !parts[0].isEmpty, let port = Int(parts[1]), (1...65535).contains(port) else { return nil }
            return Origin(host: String(parts[0]), port: port)
        default: return Origin(host: entry)  // a bare IPv6 address
        }
    }

    enum Decision { case send, pass }

    /// Whether `request` may carry the credentials. Throws when the request has no
    /// host (the loader stands before ApplyEnvironment) or would carry them over plain
    /// http to a host that is not loopback.
    func decide(_ request: APIRequest, loader: String) throws(CatenaError) -> Decision {
        try requireAbsolute(request, loader: loader)
        guard let host = request.host?.lowercased() else { return .pass }
        let scheme = request.scheme?.lowercased()
        let defaultPort = scheme == "https" ? 443 : scheme == "http" ? 80 : nil
        guard let defaultPort else { return .pass }
        let port = request.port ?? defaultPort
        let sameHost = origins.filter { $0.host == host }
        guard !sameHost.isEmpty else { return .pass }
        guard sameHost.contains(where: { ($0.port ?? defaultPort) == port }) else {
            // Most likely a configuration that predates ports: say so rather than send
            // the request without credentials and leave a bare 401 to puzzle over.
            let configured = sameHost.map { String($0.port ?? defaultPort) }.sorted().joined(separator: ", ")
            throw CatenaError(.invalidRequest, request: request,
                              detail: "\(loader) holds credentials for \(host) on port \(configured), not \(port): name \"\(host):\(port)\" in its hosts to send them there")
        }
        if scheme == "http", !allowsHTTP, !Self.isLoopback(host) {
            throw CatenaError(.invalidRequest, request: request,
                              detail: "\(loader) will not send credentials to \(host) over plain http: use https, or allowHTTP: true")
        }
        return .send
    }

    static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host.hasSuffix(".localhost") || host == "::1" { return true }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets[0] == "127" && octets.allSatisfy { UInt8($0) != nil }
    }
}

/// A user name and password for HTTP Basic authentication. Also a ``RequestOption``:
/// a request that sets it uses these credentials.
public struct BasicCredentials: Sendable, RequestOption {
    public var user: String
    public var password: String

    public init(user: String, password: String) {
        self.user = user
        self.password = password
    }

    /// "Basic base64(user:password)"
    public var headerValue: String {
        "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
    }

    public static let defaultValue: BasicCredentials? = nil
}

/// Adds HTTP Basic authentication to requests for the configured origins.
///
/// Credentials come from the request's ``BasicCredentials`` option, else from the
/// provider. Requests to other origins, and requests that already carry an
/// `Authorization` header, pass through untouched.
///
/// `hosts` entries are `"host"` or `"host:port"`; a bare host means the scheme's
/// default port. Credentials go over https, or over plain http to a loopback host;
/// a request to a configured host over http elsewhere, or on a port no entry names,
/// fails with ``CatenaError/Code/invalidRequest`` (unless `allowHTTP` is true, for
/// the first).
public struct BasicAuth: HTTPMiddleware {
    /// The origins (lowercased `"host"` or `"host:port"`) that may receive the credentials.
    public let hosts: Set<String>
    private let scope: CredentialScope
    private let provider: @Sendable (APIRequest) async throws -> BasicCredentials?

    /// Sends `credentials` to `hosts`.
    public init(hosts: Set<String>, allowHTTP: Bool = false, credentials: BasicCredentials) {
        self.init(hosts: hosts, allowHTTP: allowHTTP) { _ in credentials }
    }

    /// Asks `provider` for credentials for each request to `hosts`; nil sends none.
    public init(hosts: Set<String>, allowHTTP: Bool = false, provider: @escaping @Sendable (APIRequest) async throws -> BasicCredentials?) {
        self.hosts = Set(hosts.map { $0.lowercased() })
        self.scope = CredentialScope(hosts, allowsHTTP: allowHTTP)
        self.provider = provider
    }

    public func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        guard case .send = try scope.decide(request, loader: "BasicAuth"), request.headerFields[.authorization] == nil else {
            return try await next.load(request)
        }
        let credentials: BasicCredentials?
        if let option = request[option: BasicCredentials.self] {
            credentials = option
        } else {
            do {
                credentials = try await provider(request)
            } catch {
                throw CatenaError.wrapping(error, request: request, code: .authenticationFailed, detail: "the credentials provider failed")
            }
        }
        var request = request
        if let credentials { request.headerFields[.authorization] = credentials.headerValue }
        return try await next.load(request)
    }
}

/// An OAuth 2 style bearer token.
public struct BearerToken: Sendable, Hashable {
    public var accessToken: String
    public var refreshToken: String?
    /// When the access token stops working, if known.
    public var expiresAt: Date?

    public init(accessToken: String, refreshToken: String? = nil, expiresAt: Date? = nil) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.expiresAt = expiresAt
    }
}

/// Adds a bearer token to requests for the configured hosts, and refreshes it.
///
/// - A missing or expired token is refreshed before the request is sent.
/// - A request answered 401 is sent again once, after a refresh; a second 401 is
///   returned as it is.
/// - However many requests need a refresh at the same time, `refresh` runs once; the
///   others wait for it. If it fails, every waiting request fails with
///   ``CatenaError/Code/authenticationFailed`` carrying that error, and none is sent
///   again. The next request after that tries a new refresh.
/// - Requests to other origins never see the token. `hosts` entries are `"host"` or
///   `"host:port"`; a bare host means the scheme's default port. The token goes over
///   https, or over plain http to a loopback host; a request to a configured host
///   over http elsewhere (unless `allowHTTP` is true), or on a port no entry names,
///   fails with ``CatenaError/Code/invalidRequest``.
/// - ``reset()`` forgets the token, cancels a refresh in flight, and at once ends the
///   requests waiting for it with ``CatenaError/Code/cancelled``: a logout never waits
///   for a slow refresh.
/// - A token counts as expired `leeway` before its expiry, or half-way through its
///   lifetime when that is shorter, so short-lived tokens do not refresh on every request.
public struct TokenAuth: HTTPMiddleware {
    /// The origins (lowercased `"host"` or `"host:port"`) that may receive the token.
    public let hosts: Set<String>
    private let scope: CredentialScope
    private let store: TokenStore

    /// - Parameters:
    ///   - hosts: the origins that may receive the token: `"host"` (default port) or `"host:port"`.
    ///   - allowHTTP: send the token over plain http to hosts that are not loopback.
    ///   - token: a token to start with, such as one kept from an earlier session.
    ///   - leeway: a token this close to its expiry counts as expired.
    ///   - clock: the time, for expiry.
    ///   - refresh: gets a new token, given the one that stopped working (nil when
    ///     there was none). Called by one request at a time.
    public init(hosts: Set<String>, allowHTTP: Bool = false, token: BearerToken? = nil, leeway: Duration = .seconds(5), clock: any RetryClock = SystemRetryClock(),
                refresh: @escaping @Sendable (_ current: BearerToken?) async throws -> BearerToken) {
        self.hosts = Set(hosts.map { $0.lowercased() })
        self.scope = CredentialScope(hosts, allowsHTTP: allowHTTP)
        self.store = TokenStore(token: token, leeway: leeway, clock: clock, refresh: refresh)
    }

    /// How many refreshes have run.
    public var refreshCount: Int { store.refreshCount }

    /// The token in use, if any.
    public var currentToken: BearerToken? { store.current }

    /// How many requests are waiting for a refresh (for tests).
    var waitingForRefresh: Int { store.waiting }

    public func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        guard case .send = try scope.decide(request, loader: "TokenAuth") else { return try await next.load(request) }
        let epoch = store.epoch
        let token = try await obtain(request) { try await store.validToken(since: epoch, for: request) }
        var authorized = request
        authorized.headerFields[.authorization] = "Bearer \(token.accessToken)"
        do {
            let response = try await next.load(authorized)
            guard response.status == .unauthorized else { return response }
        } catch where error.response?.status == .unauthorized {
            // A validating loader below turned the 401 into an error: refresh all the same.
        }
        let fresh = try await obtain(request) { try await store.refreshed(replacing: token, since: epoch, for: request) }
        authorized.headerFields[.authorization] = "Bearer \(fresh.accessToken)"
        return try await next.load(authorized)
    }

    public func reset() async {
        store.reset()
    }

    private func obtain(_ request: APIRequest, _ body: () async throws -> BearerToken) async throws(CatenaError) -> BearerToken {
        do {
            return try await body()
        } catch is CancellationError {
            throw CatenaError(.cancelled, request: request, detail: "cancelled while waiting for a token")
        } catch {
            throw CatenaError(.authenticationFailed, request: request, underlyingError: error, detail: "the token refresh failed")
        }
    }
}

/// The token and the refresh in flight, shared by every copy of a ``TokenAuth``.
///
/// Requests that need a refresh wait on continuations of their own, not on the
/// refresh's task: a waiting request that is cancelled (by its caller, or by a
/// ``ResetGuard`` during logout) ends at once, however long the refresh takes.
final class TokenStore: Sendable {
    private typealias Waiter = CheckedContinuation<BearerToken, any Error>

    private struct State {
        var token: BearerToken?
        /// When `token` was obtained: its lifetime bounds the leeway.
        var obtainedAt: Date
        var refresh: Task<Void, Never>?
        /// Bumped by every refresh started and every reset: a refresh that ends
        /// under another generation was reset away and changes nothing.
        var generation: UInt64 = 0
        var waiters: [UInt64: Waiter] = [:]
        var nextWaiter: UInt64 = 0
        var refreshes = 0
        /// How many resets there were: a request that began before one never starts
        /// a refresh after it (that would log the user back in).
        var resets: UInt64 = 0
    }

    private let state: Locked<State>
    private let leeway: Duration
    private let clock: any RetryClock
    private let refresh: @Sendable (BearerToken?) async throws -> BearerToken

    init(token: BearerToken?, leeway: Duration, clock: any RetryClock, refresh: @escaping @Sendable (BearerToken?) async throws -> BearerToken) {
        // A token kept from an earlier session: its lifetime is unknown, so the full
        // leeway applies.
        self.state = Locked(State(token: token, obtainedAt: .distantPast))
        self.leeway = leeway
        self.clock = clock
        self.refresh = refresh
    }

    var refreshCount: Int { state.withLock { $0.refreshes } }
    var current: BearerToken? { state.withLock { $0.token } }
    var waiting: Int { state.withLock { $0.waiters.count } }
    /// The reset count a request starts under; hand it back to ``validToken(since:)``.
    var epoch: UInt64 { state.withLock { $0.resets } }

    /// Whether `token`, obtained at `obtainedAt`, is still good to send. The leeway
    /// is at most half the token's lifetime: a server that hands out tokens shorter
    /// than the leeway would otherwise make every request refresh.
    private func isFresh(_ token: BearerToken, obtainedAt: Date) -> Bool {
        guard let expiresAt = token.expiresAt else { return true }
        let lifetime = expiresAt.timeIntervalSince(obtainedAt)
        let margin = min(leeway.seconds, max(0, lifetime / 2))
        return expiresAt.timeIntervalSince(clock.now()) > margin
    }

    /// The current token if it is still fresh, else a refreshed one. Throws
    /// `CancellationError` when the store was reset since `epoch`.
    func validToken(since epoch: UInt64, for request: APIRequest? = nil) async throws -> BearerToken {
        let (token, obtainedAt, resets) = state.withLock { ($0.token, $0.obtainedAt, $0.resets) }
        guard resets == epoch else { throw CancellationError() }
        if let token, isFresh(token, obtainedAt: obtainedAt) { return token }
        return try await refreshed(replacing: token, since: epoch, for: request)
    }

    /// A token other than `stale`: the current one if someone already refreshed it,
    /// the result of the refresh in flight, or of a new refresh. Throws
    /// `CancellationError` at once when the calling task is cancelled or the store is
    /// reset while it waits, or was reset since `epoch`. A wait for a refresh is
    /// reported to `request`'s observers as ``CallEvent/tokenRefresh(startedRefresh:waited:succeeded:)``.
    func refreshed(replacing stale: BearerToken?, since epoch: UInt64, for request: APIRequest? = nil) async throws -> BearerToken {
        let id = state.withLock { state -> UInt64 in
            state.nextWaiter &+= 1
            return state.nextWaiter
        }
        // Set when this call waits for a refresh: whether it started that refresh.
        let waited = Locked<Bool?>(nil)
        let start = ContinuousClock.now
        do {
            let token = try await waitForToken(replacing: stale, since: epoch, id: id, waited: waited)
            if let started = waited.withLock({ $0 }) {
                request?.report(.tokenRefresh(startedRefresh: started, waited: ContinuousClock.now - start, succeeded: true))
            }
            return token
        } catch {
            if let started = waited.withLock({ $0 }) {
                request?.report(.tokenRefresh(startedRefresh: started, waited: ContinuousClock.now - start, succeeded: false))
            }
            throw error
        }
    }

    private func waitForToken(replacing stale: BearerToken?, since epoch: UInt64, id: UInt64, waited: Locked<Bool?>) async throws -> BearerToken {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (waiter: Waiter) in
                enum Now { case token(BearerToken), cancelled, waiting }
                let now = state.withLock { state -> Now in
                    // Checked under the lock: a cancel either happened before (seen
                    // here) or its handler runs after and finds the waiter.
                    if Task.isCancelled || state.resets != epoch { return .cancelled }
                    if let current = state.token, current != stale, isFresh(current, obtainedAt: state.obtainedAt) {
                        return .token(current)
                    }
                    state.waiters[id] = waiter
                    let starts = state.refresh == nil
                    if starts { startRefresh(replacing: stale, in: &state) }
                    waited.withLock { $0 = starts }
                    return .waiting
                }
                switch now {
                case .token(let token): waiter.resume(returning: token)
                case .cancelled: waiter.resume(throwing: CancellationError())
                case .waiting: break
                }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume(throwing: CancellationError())
        }
    }

    /// Starts a refresh; called with the lock held.
    private func startRefresh(replacing stale: BearerToken?, in state: inout State) {
        state.generation &+= 1
        state.refreshes += 1
        let generation = state.generation
        let refresh = self.refresh
        state.refresh = Task {
            let result: Result<BearerToken, any Error>
            do { result = .success(try await refresh(stale)) } catch { result = .failure(error) }
            self.finishRefresh(generation: generation, result: result)
        }
    }

    private func finishRefresh(generation: UInt64, result: Result<BearerToken, any Error>) {
        let waiters = state.withLock { state -> [Waiter] in
            guard state.generation == generation else { return [] }  // reset meanwhile
            state.refresh = nil
            if case .success(let token) = result {
                state.token = token
                state.obtainedAt = clock.now()
            }
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume(with: result) }
    }

    /// Forgets the token, cancels the refresh in flight and ends every request waiting
    /// for it with `CancellationError`, without waiting for the refresh to stop.
    func reset() {
        let (task, waiters) = state.withLock { state -> (Task<Void, Never>?, [Waiter]) in
            state.token = nil
            state.generation &+= 1
            state.resets &+= 1
            defer { state.refresh = nil; state.waiters = [:] }
            return (state.refresh, Array(state.waiters.values))
        }
        task?.cancel()
        for waiter in waiters { waiter.resume(throwing: CancellationError()) }
    }
}
