import Catena
import CatenaAsyncHTTPClient
import CatenaDemoServer
import Foundation
import Testing
@testable import CatenaTestSupport

/// Mutual TLS against the demo server in its client-certificate mode: the right identity
/// gets answers, no identity or another authority's fails the handshake.
@Suite("Client certificates (mutual TLS)")
struct ClientCertificateTests {
    static let strangerAuthority = Result { try DemoCertificateAuthority(commonName: "Stranger Client CA") }

    static func server(http2: Bool) async throws -> RunningDemoServer {
        let authority = try TLSServers.authority.get()
        return try await DemoServer.start(tls: DemoTLS(certificate: try authority.issue(), http2: http2, clientAuthorityDER: authority.certificateDER))
    }

    /// The base64 body of the first PEM block: its DER.
    static func der(ofPEM pem: String) throws -> Data {
        let body = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        return try #require(Data(base64Encoded: body))
    }

    static func call(_ server: RunningDemoServer, identity: ClientIdentity?, http1: Bool) async throws -> Int {
        var configuration = AsyncHTTPClientTransport.defaultConfiguration
        if http1 { configuration.httpVersion = .http1Only }
        let transport = try AsyncHTTPClientTransport(configuration: configuration, trust: try TLSServers.trust(), identity: identity, timeout: .seconds(10))
        defer { Task { try? await transport.shutdown() } }
        return try await TLSServers.chain(server, transport).load(try APIRequest(.get, path: ["api", "users", "2"])).status.code
    }

    @Test("PEM and DER identities are presented over HTTP/1.1 and HTTP/2; none, or another authority's, fails the handshake", arguments: [false, true])
    func presented(http2: Bool) async throws {
        let server = try await Self.server(http2: http2)
        defer { Task { await server.stop() } }
        let client = try TLSServers.authority.get().issueClient()
        let pem = ClientIdentity(certificateChainPEM: client.certificatePEM, privateKeyPEM: client.privateKeyPEM)
        let der = ClientIdentity(certificateChainDER: [client.certificateDER], privateKeyDER: try Self.der(ofPEM: client.privateKeyPEM))
        for identity in [pem, der] {
            #expect(try await Self.call(server, identity: identity, http1: !http2) == 200, "\(identity)")
        }
        let stranger = try Self.strangerAuthority.get().issueClient()
        let wrong = ClientIdentity(certificateChainPEM: stranger.certificatePEM, privateKeyPEM: stranger.privateKeyPEM)
        for identity in [nil, wrong] {
            let error = await #expect(throws: CatenaError.self) { _ = try await Self.call(server, identity: identity, http1: !http2) }
            #expect(error?.response == nil, "no request was answered: \(String(describing: error))")
            #expect([.cannotConnect, .connectionLost].contains(error?.code), "\(String(describing: error))")
            if !http2, identity == nil { #expect(error?.detail?.contains("requires a client certificate") == true, "\(String(describing: error))") }
        }
    }

    @Test("a PKCS #12 bundle opens with its password (made by openssl); a wrong password is refused at setup")
    func pkcs12() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catena-p12-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let client = try TLSServers.authority.get().issueClient()
        try client.certificatePEM.write(to: directory.appendingPathComponent("cert.pem"), atomically: true, encoding: .utf8)
        try client.privateKeyPEM.write(to: directory.appendingPathComponent("key.pem"), atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.currentDirectoryURL = directory
        process.arguments = ["openssl", "pkcs12", "-export", "-in", "cert.pem", "-inkey", "key.pem", "-out", "id.p12", "-passout", "pass:p12-secret"]
        try process.run()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "openssl pkcs12 -export failed")
        let bundle = try Data(contentsOf: directory.appendingPathComponent("id.p12"))
        let server = try await Self.server(http2: true)
        defer { Task { await server.stop() } }
        #expect(try await Self.call(server, identity: ClientIdentity(pkcs12: bundle, password: "p12-secret"), http1: false) == 200)
        let wrong = "WRONG-" + UUID().uuidString
        let refused = #expect(throws: ServerTrustError.self) {
            _ = try AsyncHTTPClientTransport(trust: .system, identity: ClientIdentity(pkcs12: bundle, password: wrong))
        }
        #expect(refused?.description.contains(wrong) == false, "the password is never shown")
    }

    @Test("refused at setup: a key that is not the certificate's, and any identity on URLSession; descriptions hide the key")
    func refused() throws {
        let client = try TLSServers.authority.get().issueClient()
        let other = try TLSServers.authority.get().issueClient()
        let mismatched = ClientIdentity(certificateChainPEM: client.certificatePEM, privateKeyPEM: other.privateKeyPEM)
        #expect(throws: ServerTrustError.self) { _ = try AsyncHTTPClientTransport(trust: .system, identity: mismatched) }
        #expect(throws: ServerTrustError.self) {
            _ = try AsyncHTTPClientTransport(trust: .system, identity: ClientIdentity(certificateChainPEM: "no", privateKeyPEM: "no"))
        }
        let identity = ClientIdentity(certificateChainPEM: client.certificatePEM, privateKeyPEM: client.privateKeyPEM)
        let error = #expect(throws: ServerTrustError.self) { _ = try URLSessionTransport(trust: .system, identity: identity) }
        #expect(error?.description.contains("AsyncHTTPClientTransport") == true)
        #expect("\(identity)" == "ClientIdentity(PEM)" && "\(identity.contents)" == "PEM")
        let password = "PASS-" + UUID().uuidString
        for shown in [identity, ClientIdentity(pkcs12: Data([1, 2]), password: password)] {
            var dumped = ""
            dump(shown, to: &dumped)
            dump(shown.contents, to: &dumped)
            let mirrored = Mirror(reflecting: shown).children.map { "\($0.value)" }.joined()
            for text in [dumped, mirrored, String(reflecting: shown), String(reflecting: shown.contents)] {
                #expect(!text.contains("PRIVATE KEY") && !text.contains(password), "\(text)")
            }
        }
    }
}
