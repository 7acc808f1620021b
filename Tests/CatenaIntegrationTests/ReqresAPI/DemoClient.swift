import Catena
import CatenaAsyncHTTPClient

/// A client for the shared demo server.
func demoClient(_ kind: TransportKind = .asyncHTTPClient) async throws -> Client {
    Client(try await kind.chain())
}
