#if !OpenAPI
// The package's OpenAPI trait brings swift-openapi-runtime; without it this module holds
// only placeholders that name the trait.

/// Unavailable: enable the package's `OpenAPI` trait.
@available(*, unavailable, message: "Enable the OpenAPI trait of the Catena package to use CatenaClientTransport: .package(url: …, from: …, traits: [\"OpenAPI\"])")
public enum CatenaClientTransport {}

/// Unavailable: enable the package's `OpenAPI` trait.
@available(*, unavailable, message: "Enable the OpenAPI trait of the Catena package to use OpenAPIMiddleware: .package(url: …, from: …, traits: [\"OpenAPI\"])")
public enum OpenAPIMiddleware {}
#endif
