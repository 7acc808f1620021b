import AsyncHTTPClient
import Catena
import CatenaAsyncHTTPClient
import CatenaOpenAPI
import DemoUsersOpenAPI
import Foundation
import Logging
import NIOPosix
import OpenAPIAsyncHTTPClient

/// The same generated client (`getUser`, decoded) over the official AsyncHTTPClient
/// OpenAPI transport and over Catena's bridge (the transport alone, and a chain with
/// retry and a log loader at level off), all three on one `HTTPClient`, so they share
/// its pooled connections. Goal: the bridge at least 0.95 of the official transport.
func openAPIBenchmark(base: URL, settings: Settings) async throws {
    let client = HTTPClient(
        eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: CatenaAsyncHTTPClient.AsyncHTTPClientTransport.defaultConfiguration)
    let quiet = Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() }
    let catenaTransport = CatenaAsyncHTTPClient.AsyncHTTPClientTransport(client: client, decodesCompression: true)
    let official = DemoUsersOpenAPI.Client(serverURL: base, transport: OpenAPIAsyncHTTPClient.AsyncHTTPClientTransport(configuration: .init(client: client)))
    let bridged = DemoUsersOpenAPI.Client(serverURL: base, transport: CatenaClientTransport(catenaTransport))
    let chained = DemoUsersOpenAPI.Client(
        serverURL: base, transport: CatenaClientTransport(RetryMiddleware() --> LogMiddleware(logger: quiet) --> catenaTransport))
    func variant(_ name: String, _ generated: DemoUsersOpenAPI.Client) -> Variant {
        Variant(name: name) { _ in
            let user = try await generated.getUser(path: .init(id: 2)).ok.body.json
            guard user.data.id == 2 else { throw BenchmarkError.status(0) }
        }
    }
    print("OpenAPI: one generated client (getUser, decoded) over three transports on one HTTPClient")
    try await compare(
        [
            [
                variant("official OpenAPIAsyncHTTPClient transport", official),
                variant("CatenaClientTransport over AsyncHTTPClientTransport", bridged),
                variant("CatenaClientTransport over RetryMiddleware --> Log --> AsyncHTTPClientTransport", chained),
            ]
        ], settings: settings)
    try await client.shutdown()
}
