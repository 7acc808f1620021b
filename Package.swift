// swift-tools-version: 6.1
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "Catena",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11)],
    products: [
        .library(name: "Catena", targets: ["Catena"]),
        .library(name: "CatenaAsyncHTTPClient", targets: ["CatenaAsyncHTTPClient"]),
        .library(name: "CatenaTesting", targets: ["CatenaTesting"]),
        .library(name: "CatenaOperations", targets: ["CatenaOperations"]),
        .library(name: "CatenaObservability", targets: ["CatenaObservability"]),
        .library(name: "CatenaOpenAPI", targets: ["CatenaOpenAPI"]),
        .library(name: "CatenaDemoServer", targets: ["CatenaDemoServer"]),
        .executable(name: "catena", targets: ["catena"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/adam-fowler/compress-nio", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-http2", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.13.4"),
        .package(url: "https://github.com/swift-server/swift-openapi-async-http-client", from: "1.5.0"),
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // Core: HTTP values, the loader chain, middleware, URLSession transport.
        // Depends on swift-http-types and swift-log only (no SwiftNIO).
        .target(
            name: "Catena",
            dependencies: [
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "CatenaAsyncHTTPClient",
            dependencies: [
                "Catena",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "NIOHTTPCompression", package: "swift-nio-extras"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
            ],
            swiftSettings: strict
        ),
        .target(name: "CatenaTesting", dependencies: ["Catena"], swiftSettings: strict),
        // Operation and OperationQueue for code bases built on them (seeds 000, 001, 003).
        .target(name: "CatenaOperations", dependencies: ["Catena"], swiftSettings: strict),
        // Tracing and metrics middleware (swift-distributed-tracing, swift-metrics): in a
        // target of their own, so the core stays free of them.
        .target(
            name: "CatenaObservability",
            dependencies: [
                "Catena",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            swiftSettings: strict
        ),
        // The OpenAPI bridge: generated clients through a Catena chain, and OpenAPI client
        // middleware in a Catena chain (swift-openapi-runtime).
        .target(
            name: "CatenaOpenAPI",
            dependencies: [
                "Catena",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: strict
        ),
        // The demo server's users API as swift-openapi-generator makes it from
        // openapi.yaml; the generated code is committed (see scripts/generate-openapi.sh).
        .target(
            name: "DemoUsersOpenAPI",
            dependencies: [
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            exclude: ["openapi.yaml", "openapi-generator-config.yaml"]
        ),
        // The example API module for reqres.in's users (seed 000's API).
        .target(name: "ReqresAPI", dependencies: ["Catena"], swiftSettings: strict),
        // The example API module for Flickr's photos (seed 001's API).
        .target(name: "FlickrAPI", dependencies: ["Catena"], swiftSettings: strict),
        .target(
            name: "CatenaDemoServer",
            dependencies: [
                "Catena",  // for its TSan-visible lock only
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "CompressNIO", package: "compress-nio"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "catena",
            dependencies: [
                "Catena", "CatenaAsyncHTTPClient", "CatenaDemoServer", "CatenaOperations", "ReqresAPI", "FlickrAPI",
                "CatenaObservability", "CatenaOpenAPI", "DemoUsersOpenAPI",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "CatenaBenchmarks",
            dependencies: [
                "Catena", "CatenaAsyncHTTPClient", "CatenaDemoServer", "CatenaOperations", "ReqresAPI", "FlickrAPI",
                "CatenaObservability", "CatenaOpenAPI", "DemoUsersOpenAPI",
                .product(name: "OpenAPIAsyncHTTPClient", package: "swift-openapi-async-http-client"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "CatenaTests",
            dependencies: ["Catena", "CatenaTesting", "ReqresAPI"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "CatenaOperationsTests",
            dependencies: ["CatenaOperations", "Catena"],
            swiftSettings: strict
        ),
        // ThreadSanitizer's suppressions for the test process (one, inside SwiftNIO).
        .target(name: "ThreadSanitizerSuppressions", path: "Tests/ThreadSanitizerSuppressions"),
        .testTarget(
            name: "CatenaIntegrationTests",
            dependencies: [
                "ThreadSanitizerSuppressions", "Catena", "CatenaTesting", "CatenaAsyncHTTPClient", "CatenaDemoServer", "CatenaOperations", "ReqresAPI",
                "FlickrAPI",
                "CatenaObservability", "CatenaOpenAPI", "DemoUsersOpenAPI",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
    ]
)
