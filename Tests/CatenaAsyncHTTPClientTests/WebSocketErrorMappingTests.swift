import Catena
import NIOCore
import Testing
@testable import CatenaAsyncHTTPClient

/// What a WebSocket handshake's failures read as, where a race picks which one arrives.
@Suite("WebSocket handshake errors")
struct WebSocketErrorMappingTests {
    @Test("a pipeline torn down before the upgrade was answered is a lost connection, whichever error NIO raised")
    func tornDown() throws {
        let request = try APIRequest(urlString: "wss://example.com/echo")
        // A server that closes after the TLS handshake (TLS 1.3 refusing a client's
        // certificate) removes the upgrade handler, which fails with one of these.
        let errors: [any Error] = [ChannelError.inappropriateOperationForState, ChannelPipelineError.notFound]
        for error in errors {
            let mapped = AsyncHTTPClientTransport.mapWebSocket(error, request: request, timeout: .seconds(5))
            #expect(mapped.code == .connectionLost, "\(error) → \(mapped)")
            #expect(mapped.response == nil)
        }
    }
}
