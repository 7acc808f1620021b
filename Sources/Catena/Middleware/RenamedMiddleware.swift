// Every middleware's name ends in `Middleware`, as in Hummingbird, Vapor and
// swift-openapi-runtime. The names they had before 1.0 stay as deprecated aliases
// until the 1.0 tag, so code written against them compiles with a fix-it.

@available(*, deprecated, renamed: "RetryMiddleware")
public typealias Retry = RetryMiddleware

@available(*, deprecated, renamed: "CookieMiddleware")
public typealias Cookies = CookieMiddleware

@available(*, deprecated, renamed: "EnvironmentMiddleware")
public typealias ApplyEnvironment = EnvironmentMiddleware

@available(*, deprecated, renamed: "TokenAuthMiddleware")
public typealias TokenAuth = TokenAuthMiddleware

@available(*, deprecated, renamed: "BasicAuthMiddleware")
public typealias BasicAuth = BasicAuthMiddleware

@available(*, deprecated, renamed: "CacheMiddleware")
public typealias HTTPCache = CacheMiddleware

@available(*, deprecated, renamed: "ThrottleMiddleware")
public typealias Throttle = ThrottleMiddleware

@available(*, deprecated, renamed: "DeduplicationMiddleware")
public typealias Deduplicate = DeduplicationMiddleware

@available(*, deprecated, renamed: "ValidationMiddleware")
public typealias Validate = ValidationMiddleware

@available(*, deprecated, renamed: "ResetGuardMiddleware")
public typealias ResetGuard = ResetGuardMiddleware

@available(*, deprecated, renamed: "RequestModifierMiddleware")
public typealias ModifyRequest = RequestModifierMiddleware
