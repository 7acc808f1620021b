/// Something that turns a request into a response: a transport, or a whole chain of
/// middleware ending in one.
///
/// Cancelling the calling task cancels the request in flight; the loader then throws
/// ``CatenaError`` with code ``CatenaError/Code/cancelled``.
public protocol HTTPLoader: Sendable {
    /// Loads `request` and returns the complete response.
    ///
    /// A status such as 404 is a response, not an error: validation is the job of a
    /// loader or endpoint that knows which statuses are acceptable.
    func load(_ request: APIRequest) async throws(CatenaError) -> APIResponse

    /// Drops the loader's state (tokens, queues, caches) and passes the reset on down
    /// the chain. The default does nothing.
    func reset() async
}

extension HTTPLoader {
    public func reset() async {}

    /// Loads `request` and captures the outcome, for code that hands it on.
    func result(for request: APIRequest) async -> Result<APIResponse, CatenaError> {
        do throws(CatenaError) {
            return .success(try await load(request))
        } catch {
            return .failure(error)
        }
    }
}

/// A link in a loader chain: it may change the request, hand it to the next loader,
/// look at or change the response, or answer by itself.
///
/// Compose middleware in front of a transport with `-->`:
///
/// ```swift
/// let chain = ApplyEnvironment(.init(host: "reqres.in"))
///     --> LogMiddleware(logger: logger)
///     --> AsyncHTTPClientTransport()
/// ```
public protocol HTTPMiddleware: Sendable {
    /// Handles `request`, usually by calling `next.load` once.
    func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse

    /// Drops the middleware's own state. The default does nothing.
    func reset() async

    /// Resets this middleware and the chain after it. The default calls ``reset()``,
    /// then `next.reset()`; a middleware that must act around the reset of the rest
    /// of the chain (a reset guard) implements this instead.
    func reset(next: some HTTPLoader) async
}

extension HTTPMiddleware {
    public func reset() async {}

    public func reset(next: some HTTPLoader) async {
        await reset()
        await next.reset()
    }
}

/// A middleware and the loader after it. Built by `-->`; immutable and Sendable.
public struct LoaderChain<Middleware: HTTPMiddleware, Next: HTTPLoader>: HTTPLoader {
    /// The first link.
    public let middleware: Middleware
    /// The rest of the chain.
    public let next: Next

    /// Puts `middleware` in front of `next`.
    public init(_ middleware: Middleware, next: Next) {
        self.middleware = middleware
        self.next = next
    }

    @inlinable
    public func load(_ request: APIRequest) async throws(CatenaError) -> APIResponse {
        try await middleware.load(request, next: next)
    }

    /// Resets the middleware, then the rest of the chain, top to bottom.
    public func reset() async {
        await middleware.reset(next: next)
    }
}

/// Erases a loader's type, so chains of different shapes can be stored alike.
public struct AnyHTTPLoader: HTTPLoader {
    private let base: any HTTPLoader

    /// Wraps `base`.
    public init(_ base: any HTTPLoader) {
        self.base = base
    }

    public func load(_ request: APIRequest) async throws(CatenaError) -> APIResponse {
        try await base.load(request)
    }

    public func reset() async {
        await base.reset()
    }
}

precedencegroup LoaderChainingPrecedence {
    higherThan: NilCoalescingPrecedence
    associativity: right
}

/// Chains loaders: `a --> b --> transport` sends every request through `a`, then `b`,
/// then the transport. Right-associative, so the value of the expression is the head
/// of the chain. Only a transport (or a finished chain) can stand at the end: a chain
/// that ends in middleware does not compile.
infix operator --> : LoaderChainingPrecedence

/// Puts `middleware` in front of `next`.
public func --> <Middleware: HTTPMiddleware, Next: HTTPLoader>(middleware: Middleware, next: Next) -> LoaderChain<Middleware, Next> {
    LoaderChain(middleware, next: next)
}

/// Puts `middleware` in front of a loader whose type is erased.
public func --> <Middleware: HTTPMiddleware>(middleware: Middleware, next: any HTTPLoader) -> LoaderChain<Middleware, AnyHTTPLoader> {
    LoaderChain(middleware, next: AnyHTTPLoader(next))
}
