public import Foundation
import HTTPTypes
import Synchronization

extension CatenaError.Code {
    /// Credentials could not be had: a token refresh or a credentials provider failed.
    public static let authenticationFailed = CatenaError.Code(rawValue: "authentication failed")
}

/// The request's host, lowercased. An auth loader cannot tell whether a request
/// without a host may carry credentials, so it refuses it rather than sending it
/// unauthenticated: that happens when the loader stands before ApplyEnvironment.
private func requireHost(_ request: APIRequest, loader: String) throws(CatenaError) -> String {
    guard let host = request.host?.lowercased() else {
        throw CatenaError(.invalidRequest, request: request,
                          detail: "\(loader) got a request without a host: put it after ApplyEnvironment in the chain")
    }
    return host
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

/// Adds HTTP Basic authentication to requests for the configured hosts.
///
/// Credentials come from the request's ``BasicCredentials`` option, else from the
/// provider. Requests to other hosts, and requests that already carry an
/// `Authorization` header, pass through untouched.
public struct BasicAuth: HTTPMiddleware {
    /// The hosts (lowercased) that may receive the credentials.
    public let hosts: Set<String>
    private let provider: @Sendable (APIRequest) async throws -> BasicCredentials?

    /// Sends `credentials` to `hosts`.
    public init(hosts: Set<String>, credentials: BasicCredentials) {
        self.init(hosts: hosts) { _ in credentials }
    }

    /// Asks `provider` for credentials for each request to `hosts`; nil sends none.
    public init(hosts: Set<String>, provider: @escaping @Sendable (APIRequest) async throws -> BasicCredentials?) {
        self.hosts = Set(hosts.map { $0.lowercased() })
        self.provider = provider
    }

    public func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        let host = try requireHost(request, loader: "BasicAuth")
        guard hosts.contains(host), request.headerFields[.authorization] == nil else {
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
/// - Requests to other hosts never see the token.
/// - ``reset()`` forgets the token and cancels a refresh in flight.
public struct TokenAuth: HTTPMiddleware {
    /// The hosts (lowercased) that may receive the token.
    public let hosts: Set<String>
    private let store: TokenStore

    /// - Parameters:
    ///   - hosts: the hosts that may receive the token.
    ///   - token: a token to start with, such as one kept from an earlier session.
    ///   - leeway: a token this close to its expiry counts as expired.
    ///   - clock: the time, for expiry.
    ///   - refresh: gets a new token, given the one that stopped working (nil when
    ///     there was none). Called by one request at a time.
    public init(hosts: Set<String>, token: BearerToken? = nil, leeway: Duration = .seconds(5), clock: any RetryClock = SystemRetryClock(),
                refresh: @escaping @Sendable (_ current: BearerToken?) async throws -> BearerToken) {
        self.hosts = Set(hosts.map { $0.lowercased() })
        self.store = TokenStore(token: token, leeway: leeway, clock: clock, refresh: refresh)
    }

    /// How many refreshes have run.
    public var refreshCount: Int { store.refreshCount }

    /// The token in use, if any.
    public var currentToken: BearerToken? { store.current }

    public func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        guard hosts.contains(try requireHost(request, loader: "TokenAuth")) else { return try await next.load(request) }
        let token = try await obtain(request) { try await store.validToken() }
        var authorized = request
        authorized.headerFields[.authorization] = "Bearer \(token.accessToken)"
        do {
            let response = try await next.load(authorized)
            guard response.status == .unauthorized else { return response }
        } catch where error.response?.status == .unauthorized {
            // A validating loader below turned the 401 into an error: refresh all the same.
        }
        let fresh = try await obtain(request) { try await store.refreshed(replacing: token) }
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
final class TokenStore: Sendable {
    private struct State {
        var token: BearerToken?
        var refresh: Task<BearerToken, any Error>?
        var refreshes = 0
    }

    private let state: Mutex<State>
    private let leeway: Duration
    private let clock: any RetryClock
    private let refresh: @Sendable (BearerToken?) async throws -> BearerToken

    init(token: BearerToken?, leeway: Duration, clock: any RetryClock, refresh: @escaping @Sendable (BearerToken?) async throws -> BearerToken) {
        self.state = Mutex(State(token: token))
        self.leeway = leeway
        self.clock = clock
        self.refresh = refresh
    }

    var refreshCount: Int { state.withLock { $0.refreshes } }
    var current: BearerToken? { state.withLock { $0.token } }

    private func isFresh(_ token: BearerToken) -> Bool {
        guard let expiresAt = token.expiresAt else { return true }
        return expiresAt.timeIntervalSince(clock.now()) > leeway.seconds
    }

    /// The current token if it is still fresh, else a refreshed one.
    func validToken() async throws -> BearerToken {
        let token = state.withLock { $0.token }
        if let token, isFresh(token) { return token }
        return try await refreshed(replacing: token)
    }

    /// A token other than `stale`: the current one if someone already refreshed it,
    /// the result of the refresh in flight, or of a new refresh.
    func refreshed(replacing stale: BearerToken?) async throws -> BearerToken {
        enum Next { case ready(BearerToken), wait(Task<BearerToken, any Error>) }
        let next = state.withLock { state -> Next in
            if let current = state.token, current != stale, isFresh(current) { return .ready(current) }
            if let running = state.refresh { return .wait(running) }
            let refresh = self.refresh
            let task = Task { try await refresh(stale) }
            state.refresh = task
            state.refreshes += 1
            return .wait(task)
        }
        let task: Task<BearerToken, any Error>
        switch next {
        case .ready(let token): return token
        case .wait(let running): task = running
        }
        let result = await task.result
        state.withLock { state in
            guard state.refresh == task else { return }
            state.refresh = nil
            if case .success(let token) = result { state.token = token }
        }
        try Task.checkCancellation()
        return try result.get()
    }

    func reset() {
        let task = state.withLock { state -> Task<BearerToken, any Error>? in
            state.token = nil
            defer { state.refresh = nil }
            return state.refresh
        }
        task?.cancel()
    }
}
