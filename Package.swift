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
        // Catena's own demo server, a product only so that the article snippets can link
        // it; its dependencies come with the DemoServer trait, which no user needs.
        .library(name: "CatenaDemoServer", targets: ["CatenaDemoServer"]),
    ],
    // What a dependent resolves and builds is what it asks for. The core products
    // (Catena, CatenaTesting, CatenaOperations) need swift-http-types and swift-log only;
    // each product with dependencies of its own comes with a trait:
    //   .package(url: "https://github.com/…/Catena", from: "…", traits: ["AsyncHTTPClient"])
    // Without its trait a product's module holds unavailable placeholders whose message
    // names the trait. Catena's own demo, command, benchmarks, tests and snippets are not
    // products, so nothing they use reaches a dependent (measured: scripts/check-consumer.sh);
    // building them here takes `--enable-all-traits`.
    traits: [
        .trait(name: "AsyncHTTPClient", description: "CatenaAsyncHTTPClient: the AsyncHTTPClient transport (SwiftNIO)."),
        .trait(name: "Observability", description: "CatenaObservability: tracing and metrics middleware."),
        .trait(name: "OpenAPI", description: "CatenaOpenAPI: generated OpenAPI clients through a Catena chain."),
        .trait(name: "DemoServer", description: "CatenaDemoServer: Catena's own demo server (Hummingbird), for its snippets."),
        .default(enabledTraits: []),
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
        // Allocation counts for CatenaAllocations (package-benchmark's malloc counter).
        .package(url: "https://github.com/ordo-one/malloc-interposer", from: "1.6.1"),
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
                .product(name: "AsyncHTTPClient", package: "async-http-client", condition: .when(traits: ["AsyncHTTPClient"])),
                .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["AsyncHTTPClient"])),
                .product(name: "NIOPosix", package: "swift-nio", condition: .when(traits: ["AsyncHTTPClient"])),
                .product(name: "NIOHTTP1", package: "swift-nio", condition: .when(traits: ["AsyncHTTPClient"])),
                .product(name: "NIOFoundationCompat", package: "swift-nio", condition: .when(traits: ["AsyncHTTPClient"])),
                .product(name: "NIOHTTPCompression", package: "swift-nio-extras", condition: .when(traits: ["AsyncHTTPClient"])),
                .product(name: "NIOSSL", package: "swift-nio-ssl", condition: .when(traits: ["AsyncHTTPClient"])),
                .product(name: "NIOHTTP2", package: "swift-nio-http2", condition: .when(traits: ["AsyncHTTPClient"])),
                // Already in AsyncHTTPClient's tree: to know whether the client traces.
                .product(name: "Tracing", package: "swift-distributed-tracing", condition: .when(traits: ["AsyncHTTPClient"])),
            ],
            swiftSettings: strict
        ),
        .target(name: "CatenaTesting", dependencies: ["Catena"], swiftSettings: strict),
        // Operation and OperationQueue for code bases built on them (in the manner of PeakOperation and TWGOperations).
        .target(name: "CatenaOperations", dependencies: ["Catena"], swiftSettings: strict),
        // Tracing and metrics middleware (swift-distributed-tracing, swift-metrics): in a
        // target of their own, so the core stays free of them.
        .target(
            name: "CatenaObservability",
            dependencies: [
                "Catena",
                .product(name: "Tracing", package: "swift-distributed-tracing", condition: .when(traits: ["Observability"])),
                .product(name: "Metrics", package: "swift-metrics", condition: .when(traits: ["Observability"])),
            ],
            swiftSettings: strict
        ),
        // The OpenAPI bridge: generated clients through a Catena chain, and OpenAPI client
        // middleware in a Catena chain (swift-openapi-runtime).
        .target(
            name: "CatenaOpenAPI",
            dependencies: [
                "Catena",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime", condition: .when(traits: ["OpenAPI"])),
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
        // The example API module for reqres.in's users (the API of the OperationQueue chaining tutorial).
        .target(name: "ReqresAPI", dependencies: ["Catena"], swiftSettings: strict),
        // The example API module for Flickr's photos (the API of TWGOperations' Flickr example).
        .target(name: "FlickrAPI", dependencies: ["Catena"], swiftSettings: strict),
        .target(
            name: "CatenaDemoServer",
            dependencies: [
                "Catena",  // for its TSan-visible lock only
                .product(name: "Hummingbird", package: "hummingbird", condition: .when(traits: ["DemoServer"])),
                .product(name: "HummingbirdCore", package: "hummingbird", condition: .when(traits: ["DemoServer"])),
                .product(name: "HummingbirdTLS", package: "hummingbird", condition: .when(traits: ["DemoServer"])),
                .product(name: "HummingbirdHTTP2", package: "hummingbird", condition: .when(traits: ["DemoServer"])),
                .product(name: "NIOSSL", package: "swift-nio-ssl", condition: .when(traits: ["DemoServer"])),
                .product(name: "X509", package: "swift-certificates", condition: .when(traits: ["DemoServer"])),
                .product(name: "Crypto", package: "swift-crypto", condition: .when(traits: ["DemoServer"])),
                .product(name: "SwiftASN1", package: "swift-asn1", condition: .when(traits: ["DemoServer"])),
                .product(name: "Logging", package: "swift-log", condition: .when(traits: ["DemoServer"])),
                .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["DemoServer"])),
                .product(name: "NIOPosix", package: "swift-nio", condition: .when(traits: ["DemoServer"])),
                .product(name: "NIOFoundationCompat", package: "swift-nio", condition: .when(traits: ["DemoServer"])),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: .when(traits: ["DemoServer"])),
                .product(name: "CompressNIO", package: "compress-nio", condition: .when(traits: ["DemoServer"])),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "catena",
            dependencies: [
                "Catena", "CatenaAsyncHTTPClient", "CatenaDemoServer", "CatenaOperations", "CatenaTesting", "ReqresAPI", "FlickrAPI",
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
                "BenchmarkBaselines", "Catena", "CatenaAsyncHTTPClient", "CatenaDemoServer", "CatenaOperations", "ReqresAPI", "FlickrAPI",
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
        // What a transport costs by itself, for both benchmark programs.
        .target(name: "BenchmarkBaselines", dependencies: ["Catena"], swiftSettings: strict),
        // Allocations per call, raw transport against Catena; a program of its own, since
        // its interposed malloc would slow every timed benchmark.
        .executableTarget(
            name: "CatenaAllocations",
            dependencies: [
                "BenchmarkBaselines", "Catena", "CatenaAsyncHTTPClient", "CatenaDemoServer", "CatenaOpenAPI", "DemoUsersOpenAPI",
                .product(name: "MallocInterposerSwift", package: "malloc-interposer"),
                .product(name: "OpenAPIAsyncHTTPClient", package: "swift-openapi-async-http-client"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
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
                // The command: its output formatting is unit- and fuzz-tested, and the tests run it.
                "catena",
                "FlickrAPI",
                "CatenaObservability", "CatenaOpenAPI", "DemoUsersOpenAPI",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
    ]
)
