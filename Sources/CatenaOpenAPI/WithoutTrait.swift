#if !OpenAPI
// The package's OpenAPI trait brings swift-openapi-runtime; without it this module holds
// only placeholders that name the trait.

/// Unavailable: enable the package's `OpenAPI` trait.
@available(*, unavailable, message: "CatenaClientTransport needs the Catena package's OpenAPI trait: traits: [\"OpenAPI\"]")
public struct CatenaClientTransport {
    /// Unavailable: enable the package's `OpenAPI` trait.
    @available(*, unavailable, message: "CatenaClientTransport needs the Catena package's OpenAPI trait: traits: [\"OpenAPI\"]")
    public init(_ loader: Any, streamedOperations: Set<String> = []) {}
}

/// Unavailable: enable the package's `OpenAPI` trait.
@available(*, unavailable, message: "OpenAPIMiddleware needs the Catena package's OpenAPI trait: traits: [\"OpenAPI\"]")
public struct OpenAPIMiddleware {
    /// Unavailable: enable the package's `OpenAPI` trait.
    @available(*, unavailable, message: "OpenAPIMiddleware needs the Catena package's OpenAPI trait: traits: [\"OpenAPI\"]")
    public init(_ middleware: Any) {}
}
#endif
