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

    /// Loads `request` and returns as soon as the response head has arrived; the body
    /// is read as it comes (see ``StreamedResponse``). The default loads the whole
    /// response and hands it over as one chunk; the transports stream.
    func stream(_ request: APIRequest) async throws(CatenaError) -> StreamedResponse

    /// Drops the loader's state (tokens, queues, caches) and passes the reset on down
    /// the chain. The default does nothing.
    func reset() async
}

extension HTTPLoader {
    public func reset() async {}

    public func stream(_ request: APIRequest) async throws(CatenaError) -> StreamedResponse {
        StreamedResponse(complete: try await load(request))
    }

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
/// let chain = EnvironmentMiddleware(.init(host: "reqres.in"))
///     --> LogMiddleware(logger: logger)
///     --> AsyncHTTPClientTransport()
/// ```
public protocol HTTPMiddleware: Sendable {
    /// Handles `request`, usually by calling `next.load` once.
    func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse

    /// Handles a streamed request. The default runs ``load(_:next:)`` on response
    /// heads: `next.load` returns the head of a stream (status and headers, an empty
    /// body), so a middleware written for whole responses works on streams unchanged
    /// (auth refreshes on a 401 head, retry retries until a head is accepted); the
    /// body of the head it returns reaches the caller as it arrives, and the bodies of
    /// heads it discarded are cancelled. A middleware that reads or keeps bodies
    /// (a cache, de-duplication) implements this itself.
    func stream(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> StreamedResponse

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

    public func stream(_ request: APIRequest) async throws(CatenaError) -> StreamedResponse {
        try await middleware.stream(request, next: next)
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

    public func stream(_ request: APIRequest) async throws(CatenaError) -> StreamedResponse {
        try await base.stream(request)
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
