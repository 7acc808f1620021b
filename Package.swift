// swift-tools-version: 6.1
import PackageDescription

// The tree: `Sources/` holds the six library products and nothing else. `Tools/` holds
// the `catena` command and the demo server, `Examples/` the example API modules and the
// generated OpenAPI client, `Benchmarks/` the benchmark programs. None of those is a
// product but the demo server (for the snippets) and the `catena` command; a named
// product's dependencies are resolved for every dependent, so theirs come with a trait.
//
// What a dependent resolves and builds is what it asks for. The core products
// (Catena, CatenaTesting, CatenaOperations) need swift-http-types, swift-log and
// swift-http-structured-headers only (none has a dependency of its own);
// each product with dependencies of its own comes with a trait:
//   .package(url: "https://github.com/…/Catena", from: "…", traits: ["AsyncHTTPClient"])
// Without its trait a product's module holds unavailable placeholders whose message
// names the trait (checked by scripts/check-consumer.sh). Building the tools, examples,
// benchmarks and tests here takes `--enable-all-traits`.

/// The products each trait brings, named once: `traitDependencies("X")` is a target's
/// dependency on all of them, present only while trait X is enabled.
let productsOfTrait: [String: [(product: String, package: String)]] = [
    "AsyncHTTPClient": [
        ("AsyncHTTPClient", "async-http-client"), ("NIOCore", "swift-nio"), ("NIOPosix", "swift-nio"),
        ("NIOHTTP1", "swift-nio"), ("NIOFoundationCompat", "swift-nio"), ("NIOHTTPCompression", "swift-nio-extras"),
        ("NIOSOCKS", "swift-nio-extras"), ("NIOSSL", "swift-nio-ssl"), ("NIOHTTP2", "swift-nio-http2"),
        // WebSockets: SwiftNIO's frame codec and upgrader, and the CONNECT handler for proxies.
        ("NIOWebSocket", "swift-nio"), ("NIOTLS", "swift-nio"), ("NIOExtras", "swift-nio-extras"),
        // Already in AsyncHTTPClient's tree: to know whether the client traces.
        ("Tracing", "swift-distributed-tracing"),
    ],
    "Observability": [("Tracing", "swift-distributed-tracing"), ("Metrics", "swift-metrics")],
    "OpenAPI": [("OpenAPIRuntime", "swift-openapi-runtime")],
    "DemoServer": [
        ("Hummingbird", "hummingbird"), ("HummingbirdCore", "hummingbird"), ("HummingbirdTLS", "hummingbird"),
        ("HummingbirdHTTP2", "hummingbird"), ("NIOSSL", "swift-nio-ssl"), ("X509", "swift-certificates"),
        ("Crypto", "swift-crypto"), ("SwiftASN1", "swift-asn1"), ("Logging", "swift-log"), ("NIOCore", "swift-nio"),
        ("NIOPosix", "swift-nio"), ("NIOFoundationCompat", "swift-nio"), ("ServiceLifecycle", "swift-service-lifecycle"),
        ("CompressNIO", "compress-nio"), ("HummingbirdWebSocket", "hummingbird-websocket"),
        ("HummingbirdWSCompression", "hummingbird-websocket"),
    ],
]

func traitDependencies(_ trait: String) -> [Target.Dependency] {
    when(trait, productsOfTrait[trait]!)
}

/// A dependency on each of `products`, present only while `trait` is enabled.
func when(_ trait: String, _ products: [(product: String, package: String)]) -> [Target.Dependency] {
    products.map { .product(name: $0.product, package: $0.package, condition: .when(traits: [trait])) }
}

/// The command's products beyond the library's: under the DemoServer trait (see the
/// `catena` product).
let commandProducts: [(product: String, package: String)] = [
    ("Tracing", "swift-distributed-tracing"), ("InMemoryTracing", "swift-distributed-tracing"),
    ("MetricsTestKit", "swift-metrics"), ("ArgumentParser", "swift-argument-parser"),
    ("HTTPTypes", "swift-http-types"), ("Logging", "swift-log"),
]

/// Products used unconditionally: by the benchmarks and tests, and, where a named product
/// reaches the target, swift-http-types, swift-log and swift-http-structured-headers only.
func products(_ names: [(String, String)]) -> [Target.Dependency] {
    names.map { .product(name: $0.0, package: $0.1) }
}

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
        // `swift run catena`: the command's module is CatenaCLI, since a module `catena`
        // beside `Catena` would share one build folder on a case-insensitive disk. A named
        // product's dependencies are resolved for every dependent, so all of the command's
        // that are not the library's own come with the DemoServer trait (checked by
        // scripts/check-consumer.sh).
        .executable(name: "catena", targets: ["CatenaCLI"]),
    ],
    traits: [
        .trait(name: "AsyncHTTPClient", description: "CatenaAsyncHTTPClient: the AsyncHTTPClient transport (SwiftNIO)."),
        .trait(name: "Observability", description: "CatenaObservability: tracing and metrics middleware."),
        .trait(name: "OpenAPI", description: "CatenaOpenAPI: generated OpenAPI clients through a Catena chain."),
        .trait(
            name: "DemoServer",
            description: "Catena's own demo server (Hummingbird) and the catena command, for its snippets and tools; no user needs it."
        ),
        .default(enabledTraits: []),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-http-structured-headers", from: "1.7.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket", from: "2.8.1"),
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
        // MARK: The library (Sources/)

        // Core: HTTP values, the loader chain, middleware, URLSession transport.
        // Depends on swift-http-types, swift-log and swift-http-structured-headers only (no SwiftNIO).
        .target(
            name: "Catena",
            dependencies: [
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                // RFC 9651 fields (RateLimit, RateLimit-Policy): Apple's reader, no dependencies.
                .product(name: "RawStructuredFieldValues", package: "swift-http-structured-headers"),
            ]
        ),
        .target(
            name: "CatenaAsyncHTTPClient",
            dependencies: ["Catena", .target(name: "CCatenaZlib", condition: .when(traits: ["AsyncHTTPClient"]))] + traitDependencies("AsyncHTTPClient")
        ),
        // The system's zlib, for WebSockets' permessage-deflate: a module map, nothing to
        // build (Apple's SDKs have it; on Debian, zlib1g-dev). SwiftNIO's own copy of zlib
        // is an internal target of swift-nio-extras that no product exports.
        .systemLibrary(name: "CCatenaZlib", path: "Sources/CCatenaZlib", providers: [.apt(["zlib1g-dev"])]),
        .target(name: "CatenaTesting", dependencies: ["Catena"]),
        // Operation and OperationQueue for code bases built on them (in the manner of PeakOperation and TWGOperations).
        .target(name: "CatenaOperations", dependencies: ["Catena"]),
        // Tracing and metrics middleware, in a target of their own so the core stays free of them.
        .target(name: "CatenaObservability", dependencies: ["Catena"] + traitDependencies("Observability")),
        // Generated OpenAPI clients through a Catena chain, and OpenAPI client middleware in one.
        .target(
            name: "CatenaOpenAPI",
            dependencies: ["Catena", .product(name: "HTTPTypes", package: "swift-http-types")] + traitDependencies("OpenAPI")
        ),

        // MARK: The command and the demo server (Tools/)

        .target(
            name: "CatenaDemoServer",
            dependencies: ["Catena"] + traitDependencies("DemoServer"),  // Catena for its TSan-visible lock only
            path: "Tools/CatenaDemoServer"
        ),
        .executableTarget(
            name: "CatenaCLI",
            dependencies: [
                "Catena", "CatenaAsyncHTTPClient", "CatenaDemoServer", "CatenaOperations", "CatenaTesting", "ReqresAPI", "FlickrAPI",
                "CatenaObservability", "CatenaOpenAPI", "DemoUsersOpenAPI",
            ]
                + when("DemoServer", commandProducts),
            path: "Tools/CatenaCLI"
        ),

        // MARK: Example API modules and the generated OpenAPI client (Examples/)

        // The demo server's users API as swift-openapi-generator makes it from
        // openapi.yaml; the generated code is committed (see scripts/generate-openapi.sh).
        .target(
            name: "DemoUsersOpenAPI",
            // Under the OpenAPI trait: a named product (the command) depends on this target.
            dependencies: products([("HTTPTypes", "swift-http-types")]) + traitDependencies("OpenAPI"),
            path: "Examples/DemoUsersOpenAPI",
            exclude: ["openapi.yaml", "openapi-generator-config.yaml"]
        ),
        // reqres.in's users (the API of the OperationQueue chaining tutorial).
        .target(name: "ReqresAPI", dependencies: ["Catena"], path: "Examples/ReqresAPI"),
        // Flickr's photos (the API of TWGOperations' Flickr example).
        .target(name: "FlickrAPI", dependencies: ["Catena"], path: "Examples/FlickrAPI"),

        // MARK: Benchmarks (Benchmarks/)

        .executableTarget(
            name: "CatenaBenchmarks",
            dependencies: [
                "BenchmarkBaselines", "Catena", "CatenaAsyncHTTPClient", "CatenaDemoServer", "CatenaOperations", "ReqresAPI", "FlickrAPI",
                "CatenaObservability", "CatenaOpenAPI", "DemoUsersOpenAPI",
            ]
                + products([
                    ("OpenAPIAsyncHTTPClient", "swift-openapi-async-http-client"), ("Tracing", "swift-distributed-tracing"),
                    ("Metrics", "swift-metrics"), ("AsyncHTTPClient", "async-http-client"), ("Logging", "swift-log"),
                    ("NIOCore", "swift-nio"), ("NIOPosix", "swift-nio"), ("NIOFoundationCompat", "swift-nio"),
                    ("NIOSSL", "swift-nio-ssl"), ("NIOHTTP1", "swift-nio"), ("NIOWebSocket", "swift-nio"),
                ]),
            path: "Benchmarks/CatenaBenchmarks"
        ),
        // What a transport costs by itself, for both benchmark programs.
        .target(name: "BenchmarkBaselines", dependencies: ["Catena"], path: "Benchmarks/BenchmarkBaselines"),
        // Allocations per call, raw transport against Catena; a program of its own, since
        // its interposed malloc would slow every timed benchmark.
        .executableTarget(
            name: "CatenaAllocations",
            dependencies: [
                "BenchmarkBaselines", "Catena", "CatenaAsyncHTTPClient", "CatenaDemoServer", "CatenaOpenAPI", "DemoUsersOpenAPI",
            ]
                + products([
                    ("MallocInterposerSwift", "malloc-interposer"), ("OpenAPIAsyncHTTPClient", "swift-openapi-async-http-client"),
                    ("AsyncHTTPClient", "async-http-client"), ("Logging", "swift-log"), ("NIOCore", "swift-nio"),
                    ("NIOPosix", "swift-nio"), ("NIOFoundationCompat", "swift-nio"),
                ]),
            path: "Benchmarks/CatenaAllocations"
        ),

        // MARK: Tests: one target per product, its folders mirroring the product's

        // Shared by the test targets: the demo servers (plain and TLS) started once per
        // test process, both transports, and time bounds stretched under ThreadSanitizer.
        .target(
            name: "CatenaTestSupport",
            dependencies: ["ThreadSanitizerSuppressions", "Catena", "CatenaAsyncHTTPClient", "CatenaDemoServer"]
                + products([("AsyncHTTPClient", "async-http-client"), ("NIOSSL", "swift-nio-ssl"), ("Logging", "swift-log")]),
            path: "Tests/CatenaTestSupport"
        ),
        // ThreadSanitizer's suppressions for the test process (each explained in its file).
        .target(name: "ThreadSanitizerSuppressions", path: "Tests/ThreadSanitizerSuppressions"),
        .testTarget(
            name: "CatenaTests",
            dependencies: ["Catena", "CatenaTesting", "CatenaTestSupport", "CatenaAsyncHTTPClient", "CatenaDemoServer", "ReqresAPI"]
                + products([("AsyncHTTPClient", "async-http-client"), ("NIOSSL", "swift-nio-ssl"), ("Logging", "swift-log")])
        ),
        .testTarget(
            name: "CatenaAsyncHTTPClientTests",
            dependencies: ["Catena", "CatenaAsyncHTTPClient", "CatenaTesting", "CatenaTestSupport", "CatenaDemoServer"]
                + products([
                    ("AsyncHTTPClient", "async-http-client"), ("NIOCore", "swift-nio"), ("NIOPosix", "swift-nio"), ("NIOHTTP1", "swift-nio"),
                    ("NIOSSL", "swift-nio-ssl"),
                ])
        ),
        .testTarget(name: "CatenaTestingTests", dependencies: ["Catena", "CatenaTesting", "CatenaTestSupport", "CatenaDemoServer"]),
        .testTarget(
            name: "CatenaOperationsTests",
            dependencies: ["CatenaOperations", "Catena", "CatenaAsyncHTTPClient", "CatenaTestSupport", "ReqresAPI", "FlickrAPI"]
        ),
        .testTarget(
            name: "CatenaObservabilityTests",
            dependencies: ["Catena", "CatenaObservability", "CatenaAsyncHTTPClient", "CatenaTesting", "CatenaTestSupport", "CatenaDemoServer"]
                + products([
                    ("AsyncHTTPClient", "async-http-client"), ("Tracing", "swift-distributed-tracing"), ("Logging", "swift-log"),
                    ("InMemoryTracing", "swift-distributed-tracing"), ("MetricsTestKit", "swift-metrics"),
                ])
        ),
        .testTarget(
            name: "CatenaOpenAPITests",
            dependencies: ["Catena", "CatenaOpenAPI", "CatenaAsyncHTTPClient", "CatenaTestSupport", "DemoUsersOpenAPI"]
                + products([("OpenAPIRuntime", "swift-openapi-runtime")])
        ),
        // The command: its output formatting is unit- and fuzz-tested, and the tests run it.
        .testTarget(
            name: "CatenaCLITests",
            dependencies: ["Catena", "CatenaCLI", "CatenaTesting", "CatenaTestSupport", "CatenaDemoServer"]
        ),
        .testTarget(
            name: "CatenaDemoServerTests",
            dependencies: ["Catena", "CatenaDemoServer", "CatenaAsyncHTTPClient", "CatenaTestSupport", "ReqresAPI"]
        ),
        // The example API modules, a test per endpoint.
        .testTarget(
            name: "ExamplesTests",
            dependencies: ["Catena", "CatenaAsyncHTTPClient", "CatenaDemoServer", "CatenaTestSupport", "ReqresAPI", "FlickrAPI"]
        ),
    ]
)

// Every Swift target of ours is strict, but the generated client, which the generator
// writes, and the C suppressions.
for target in package.targets where target.type != .system && !["DemoUsersOpenAPI", "ThreadSanitizerSuppressions"].contains(target.name) {
    target.swiftSettings =
        (target.swiftSettings ?? []) + [
            .enableUpcomingFeature("ExistentialAny"),
            .enableUpcomingFeature("InternalImportsByDefault"),
        ]
}
