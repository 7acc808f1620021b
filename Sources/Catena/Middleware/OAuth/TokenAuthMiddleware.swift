import Foundation
import HTTPTypes
import Synchronization

/// Adds a bearer token to requests for the configured hosts, and refreshes it.
///
/// - A missing or expired token is refreshed before the request is sent.
/// - A request answered 401 is sent again once, after a refresh, unless the answer's
///   `WWW-Authenticate: Bearer` challenge says `error="insufficient_scope"` (a new
///   token would not help: the 401 is returned as it is). A token a 401 renewed is on
///   probation until the server takes it: a 401 for it, whichever call sent it, within
///   a minute of the renewal, fails the call with ``CatenaError/Code/authenticationFailed``
///   instead of renewing again, so a server that refuses every token costs one token
///   request (or refresh-token rotation) a minute, not one per call.
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
public struct TokenAuthMiddleware: HTTPMiddleware {
    /// The origins (lowercased `"host"` or `"host:port"`) that may receive the token.
    public let hosts: Set<String>
    private let scope: CredentialScope
    private let store: TokenStore
    /// An OAuth client's storage and revocation: told of a reset before the token is
    /// forgotten, so that no refresh can bring it back, and given the token after.
    let keeper: OAuth2TokenKeeper?

    /// - Parameters:
    ///   - hosts: the origins that may receive the token: `"host"` (default port) or `"host:port"`.
    ///   - allowHTTP: send the token over plain http to hosts that are not loopback.
    ///   - token: a token to start with, such as one kept from an earlier session.
    ///   - leeway: a token this close to its expiry counts as expired.
    ///   - clock: the time, for expiry.
    ///   - refresh: gets a new token, given the one that stopped working (nil when
    ///     there was none). Called by one request at a time.
    public init(
        hosts: Set<String>, allowHTTP: Bool = false, token: BearerToken? = nil, leeway: Duration = .seconds(5), clock: any RetryClock = SystemRetryClock(),
        refresh: @escaping @Sendable (_ current: BearerToken?) async throws -> BearerToken
    ) {
        self.hosts = Set(hosts.map { $0.lowercased() })
        self.scope = CredentialScope(hosts, allowsHTTP: allowHTTP)
        self.store = TokenStore(token: token, leeway: leeway, clock: clock, refresh: refresh)
        self.keeper = nil
    }

    init(
        hosts: Set<String>, allowHTTP: Bool, token: BearerToken?, leeway: Duration, clock: any RetryClock,
        keeper: OAuth2TokenKeeper
    ) {
        self.hosts = Set(hosts.map { $0.lowercased() })
        self.scope = CredentialScope(hosts, allowsHTTP: allowHTTP)
        self.store = TokenStore(token: token, leeway: leeway, clock: clock) { try await keeper.refresh($0) }
        self.keeper = keeper
    }

    /// How many refreshes have run.
    public var refreshCount: Int { store.refreshCount }

    /// The token in use, if any.
    public var currentToken: BearerToken? { store.current }

    /// How many requests are waiting for a refresh (for tests).
    var waitingForRefresh: Int { store.waiting }

    public func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        guard case .send = try scope.decide(request, loader: "TokenAuthMiddleware") else { return try await next.load(request) }
        let epoch = store.epoch
        let token = try await obtain(request) { try await store.validToken(since: epoch, for: request) }
        var authorized = request
        authorized.headerFields[.authorization] = "Bearer \(token.accessToken)"
        let refused: APIResponse
        var refusal: CatenaError?
        do {
            let response = try await next.load(authorized)
            guard response.status == .unauthorized else {
                store.confirm(token)
                return response
            }
            refused = response
        } catch let error where error.response?.status == .unauthorized {
            // A validating loader below turned the 401 into an error: refresh all the same.
            refused = error.response!
            refusal = error
        }
        if BearerChallenge(in: refused.headerFields)?.error == "insufficient_scope" {
            // A new token would carry the same scope: the answer stands as it came.
            if let refusal { throw refusal }
            return refused
        }
        if store.isRecentRenewal(token) { throw Self.refusedRenewal(request, refused) }
        let fresh = try await obtain(request) { try await store.refreshed(replacing: token, since: epoch, for: request) }
        store.noteRenewal(fresh)
        authorized.headerFields[.authorization] = "Bearer \(fresh.accessToken)"
        let answer: APIResponse
        do {
            answer = try await next.load(authorized)
        } catch let error where error.response?.status == .unauthorized {
            if BearerChallenge(in: error.response!.headerFields)?.error == "insufficient_scope" { throw error }
            throw Self.refusedRenewal(request, error.response!)
        }
        guard answer.status == .unauthorized else {
            store.confirm(fresh)
            return answer
        }
        if BearerChallenge(in: answer.headerFields)?.error == "insufficient_scope" { return answer }
        throw Self.refusedRenewal(request, answer)
    }

    private static func refusedRenewal(_ request: APIRequest, _ response: APIResponse) -> CatenaError {
        CatenaError(
            .authenticationFailed, request: request, response: response,
            detail: "the server refused a renewed token too (401); not renewing it again for every call")
    }

    public func reset() async {
        let stored = keeper?.signOut()
        let forgotten = store.reset()
        await keeper?.revoke(forgotten, stored: stored)
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

/// The token and the refresh in flight, shared by every copy of a ``TokenAuthMiddleware``.
///
/// Requests that need a refresh wait on continuations of their own, not on the
/// refresh's task: a waiting request that is cancelled (by its caller, or by a
/// ``ResetGuardMiddleware`` during logout) ends at once, however long the refresh takes.
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
        /// The last token a 401 renewed, and when: a 401 for it within a minute is a
        /// refusal of renewed tokens, not a reason to renew again.
        var renewed: (accessToken: String, at: Date)?
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
    /// Notes that a 401 renewed the token to `token` (once, by whichever caller got it
    /// first): on probation until an answer other than 401 confirms it.
    func noteRenewal(_ token: BearerToken) {
        let now = clock.now()
        state.withLock { state in
            if state.renewed?.accessToken != token.accessToken { state.renewed = (token.accessToken, now) }
            onProbation.store(true, ordering: .releasing)
        }
    }

    /// Ends `token`'s probation: the server took it. One atomic load on the common path.
    func confirm(_ token: BearerToken) {
        guard onProbation.load(ordering: .acquiring) else { return }
        state.withLock { state in
            if state.renewed?.accessToken == token.accessToken { state.renewed = nil }
            if state.renewed == nil { onProbation.store(false, ordering: .releasing) }
        }
    }

    /// Whether a renewed token awaits its first answer other than 401.
    private let onProbation = Atomic<Bool>(false)

    /// Whether a 401 renewed the token to `token` less than ``renewalMemory`` ago.
    func isRecentRenewal(_ token: BearerToken) -> Bool {
        let now = clock.now()
        return state.withLock { state in
            guard let renewed = state.renewed, renewed.accessToken == token.accessToken else { return false }
            return now.timeIntervalSince(renewed.at) < Self.renewalMemory
        }
    }

    /// How long after a 401's renewal a 401 for the new token counts as a refusal of it.
    static let renewalMemory: TimeInterval = 60

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
    /// Returns the token it forgot.
    @discardableResult
    func reset() -> BearerToken? {
        let (task, waiters, token) = state.withLock { state -> (Task<Void, Never>?, [Waiter], BearerToken?) in
            let token = state.token
            state.token = nil
            state.renewed = nil
            state.generation &+= 1
            state.resets &+= 1
            defer { state.refresh = nil; state.waiters = [:] }
            return (state.refresh, Array(state.waiters.values), token)
        }
        task?.cancel()
        for waiter in waiters { waiter.resume(throwing: CancellationError()) }
        return token
    }
}
