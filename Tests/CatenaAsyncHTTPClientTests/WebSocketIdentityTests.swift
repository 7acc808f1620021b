import Catena
import CatenaAsyncHTTPClient
import CatenaDemoServer
import Foundation
import Testing
@testable import CatenaTestSupport

/// A client certificate over wss, against Python's `websockets` behind Python's own TLS
/// (OpenSSL), which requires one from the test authority.
@Suite("WebSockets with a client certificate", .enabled(if: WebSocketServerProcess.testsRun), .serialized, .timeLimit(.minutes(3)))
struct WebSocketIdentityTests {
    @Test("the transport's identity is presented at the handshake; none, or another authority's, gets no socket")
    func clientCertificate() async throws {
        let authority = try TLSServers.authority.get()
        let certificate = try authority.issue()
        let server = try await WebSocketServerProcess.start(
            certificatePEM: certificate.certificatePEM, keyPEM: certificate.privateKeyPEM, clientAuthorityPEM: authority.certificatePEM)
        defer { server.stop() }
        let trust = try TLSServers.trust()
        let client = try authority.issueClient()
        let identity = ClientIdentity(certificateChainPEM: client.certificatePEM, privateKeyPEM: client.privateKeyPEM)
        let identified = try AsyncHTTPClientTransport(trust: trust, identity: identity)
        defer { Task { try? await identified.shutdown() } }
        let socket = try await identified.webSocket(try APIRequest(urlString: server.url("/echo")))
        try await socket.send(text: "it is me")
        var iterator = socket.messages.makeAsyncIterator()
        #expect(try await iterator.next() == .text("it is me"))
        await socket.close()
        #expect(socket.closeStatus?.code == .normalClosure)

        let stranger = try DemoCertificateAuthority(commonName: "Stranger Client CA").issueClient()
        let strangers = try AsyncHTTPClientTransport(
            trust: trust, identity: ClientIdentity(certificateChainPEM: stranger.certificatePEM, privateKeyPEM: stranger.privateKeyPEM))
        let anonymous = try AsyncHTTPClientTransport(trust: trust)
        defer {
            Task {
                try? await strangers.shutdown()
                try? await anonymous.shutdown()
            }
        }
        for transport in [strangers, anonymous] {
            var request = try APIRequest(urlString: server.url("/echo"))
            request[option: RequestTimeout.self] = .seconds(10)
            let error = await #expect(throws: CatenaError.self) { try await transport.webSocket(request) }
            #expect([.cannotConnect, .connectionLost, .invalidResponse].contains(error?.code), "\(String(describing: error))")
            #expect(error?.response == nil, "no upgrade was answered: \(String(describing: error))")
        }
    }
}
