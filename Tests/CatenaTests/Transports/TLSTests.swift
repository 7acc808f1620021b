import AsyncHTTPClient
import Catena
import CatenaAsyncHTTPClient
import CatenaDemoServer
import CatenaTesting
import Foundation
import NIOSSL
import Testing
@testable import CatenaTestSupport

/// Serialized: under ThreadSanitizer an instrumented TLS handshake costs the event
/// loop it runs on tens of milliseconds, and a dozen at once held the loops the rest of
/// the suite shares long enough to make a 300 ms timeout fire after 5 s.
@Suite("HTTPS against the demo server", .serialized)
struct TLSTests {
    struct Peer: Decodable { let peer: String }

    @Test(
        "trusting the demo authority through ServerTrust: users, a 1 MiB body and an upload over HTTPS (AsyncHTTPClient)",
        arguments: [false, true])
    func trusted(excludingSystemRoots: Bool) async throws {
        let server = try await TLSServers.running()
        #expect(server.baseURL.scheme == "https")
        let transport = try AsyncHTTPClientTransport(trust: try TLSServers.trust(excludingSystemRoots: excludingSystemRoots))
        defer { Task { try? await transport.shutdown() } }
        let chain = try TLSServers.chain(server, transport)
        let user = try await chain.load(try APIRequest(.get, path: ["api", "users", "2"]))
        #expect(user.status == .ok)
        let bytes = try await chain.load(try APIRequest(.get, path: ["api", "bytes", String(1 << 20)]))
        #expect(bytes.body == patternData(1 << 20))
        let upload = patternData(300_000)
        let echoed = try await chain.load(try APIRequest(.post, path: ["api", "echo"], body: .data(upload, contentType: "application/octet-stream")))
        #expect(try JSONDecoder().decode(Echo.self, from: echoed.body).bodyLength == upload.count)
    }

    @Test(
        "without the authority, an expired leaf, a leaf for another host, an unknown authority: untrustedServer, and no request reached the server",
        arguments: TLSServers.Kind.allCases)
    func refused(kind: TLSServers.Kind) async throws {
        let server = try await TLSServers.running(kind)
        let key = UUID().uuidString
        let transport = try AsyncHTTPClientTransport(trust: try TLSServers.trust())
        defer { Task { try? await transport.shutdown() } }
        let error = await #expect(throws: CatenaError.self) {
            _ = try await TLSServers.chain(server, transport).load(try APIRequest(.get, path: ["api", "cache", key]))
        }
        #expect(error?.code == .untrustedServer, "\(String(describing: error))")
        #expect(error?.response == nil)
        if kind == .otherHost {
            // Nothing reached the handler: ask the server's counter through a client
            // that trusts the authority but skips the host name check (tests only).
            var configuration = AsyncHTTPClientTransport.defaultConfiguration
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.additionalTrustRoots = [.certificates([try NIOSSLCertificate(bytes: Array(try TLSServers.authority.get().certificateDER), format: .der)])]
            tls.certificateVerification = .noHostnameVerification
            configuration.tlsConfiguration = tls
            let lenient = AsyncHTTPClientTransport(configuration: configuration)
            defer { Task { try? await lenient.shutdown() } }
            let stats = try await TLSServers.chain(server, lenient).load(try APIRequest(.get, path: ["api", "cache-stats", key]))
            #expect(String(decoding: stats.body, as: UTF8.self) == #"{"full":0,"notModified":0}"#)
        }
    }

    @Test(
        "the system's roots alone trust none of the demo servers, on both transports",
        arguments: TransportKind.allCases, [nil] + (Timing.isThreadSanitized ? [] : TLSServers.Kind.allCases))
    func systemRootsRefuse(kind: TransportKind, server: TLSServers.Kind?) async throws {
        let server = if let server { try await TLSServers.running(server) } else { try await TLSServers.running() }
        let error = await #expect(throws: CatenaError.self) {
            _ = try await TLSServers.chain(server, kind.make()).load(try APIRequest(.get, path: ["api", "users", "2"]))
        }
        #expect(error?.code == .untrustedServer, "\(String(describing: error)) \(String(describing: error?.underlyingError))")
        #expect(error.map { "\($0)" }?.contains("certificate") == true, "\(String(describing: error))")
    }

    @Test(
        "pinning by trust anchor (AsyncHTTPClient): the pinned root alone accepts its chain through an intermediate, and refuses an expired leaf, another host, another CA"
    )
    func pinnedRoot() async throws {
        let pinned = try AsyncHTTPClientTransport(
            trust: ServerTrust(additionalRoots: [try TLSServers.authority.get().certificateDER], excludesSystemRoots: true))
        defer { Task { try? await pinned.shutdown() } }
        let chained = try await TLSServers.runningChained()
        #expect(try await TLSServers.chain(chained, pinned).load(try APIRequest(.get, path: ["api", "users", "2"])).status == .ok)
        for server in [try await TLSServers.runningChained(expired: true), try await TLSServers.running(.otherHost)] {
            let error = await #expect(throws: CatenaError.self) {
                _ = try await TLSServers.chain(server, pinned).load(try APIRequest(.get, path: ["api", "users", "2"]))
            }
            #expect(error?.code == .untrustedServer, "\(String(describing: error))")
        }
        let unrelated = try AsyncHTTPClientTransport(
            trust: ServerTrust(additionalRoots: [try DemoCertificateAuthority(commonName: "Unrelated CA").certificateDER], excludesSystemRoots: true))
        defer { Task { try? await unrelated.shutdown() } }
        let error = await #expect(throws: CatenaError.self) {
            _ = try await TLSServers.chain(chained, unrelated).load(try APIRequest(.get, path: ["api", "users", "2"]))
        }
        #expect(error?.code == .untrustedServer, "\(String(describing: error))")

        // The configuration's own extra roots do not widen a trust that excludes all but its own.
        var configuration = AsyncHTTPClientTransport.defaultConfiguration
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.additionalTrustRoots = [.certificates([try NIOSSLCertificate(bytes: Array(try TLSServers.authority.get().certificateDER), format: .der)])]
        configuration.tlsConfiguration = tls
        let widened = try AsyncHTTPClientTransport(
            configuration: configuration,
            trust: ServerTrust(additionalRoots: [try DemoCertificateAuthority(commonName: "Unrelated CA").certificateDER], excludesSystemRoots: true))
        defer { Task { try? await widened.shutdown() } }
        let refused = await #expect(throws: CatenaError.self) {
            _ = try await TLSServers.chain(chained, widened).load(try APIRequest(.get, path: ["api", "users", "2"]))
        }
        #expect(refused?.code == .untrustedServer, "\(String(describing: refused))")
    }

    @Test(
        "an intermediate or a leaf as the only anchor is refused at setup (NIOSSL has no partial-chain setting: every handshake would fail)",
        arguments: ["intermediate", "leaf"])
    func nonRootAnchor(anchor: String) throws {
        let der =
            anchor == "intermediate"
            ? try TLSServers.intermediate.get().certificateDER : try TLSServers.chainedLeaf.get().certificateDER
        for excluding in [true, false] {
            let error = #expect(throws: ServerTrustError.self) {
                _ = try AsyncHTTPClientTransport(trust: ServerTrust(additionalRoots: [der], excludesSystemRoots: excluding))
            }
            #expect(error?.description.contains("not a root") == true, "\(String(describing: error))")
        }
    }

    @Test("a certificate's issuer and subject are read from any bytes without a trap: roots yes, others no, broken ones nil")
    func certificateNames() throws {
        let root = try TLSServers.authority.get().certificateDER
        let intermediate = try TLSServers.intermediate.get().certificateDER
        let leaf = try TLSServers.chainedLeaf.get().certificateDER
        #expect(CertificateNames.isSelfIssued(root) == true)
        #expect(CertificateNames.isSelfIssued(intermediate) == false)
        #expect(CertificateNames.isSelfIssued(leaf) == false)
        for count in 0..<root.count { #expect(CertificateNames.isSelfIssued(root.prefix(count)) == nil, "\(count) bytes") }
        #expect(CertificateNames.isSelfIssued(root + [0]) == nil, "trailing bytes")
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
        for _ in 0..<5_000 {
            var bytes = [UInt8](Bool.random(using: &generator) ? root : leaf)
            for _ in 0...Int(generator.next() % 4) {
                bytes[Int(generator.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: generator.next())
            }
            _ = CertificateNames.isSelfIssued(Data(bytes))
            let noise = (0..<Int(generator.next() % 64)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            _ = CertificateNames.isSelfIssued(Data([0x30, 0x84, 0xff, 0xff, 0xff, 0xff] + noise))
            _ = CertificateNames.isSelfIssued(Data(noise))
        }
    }

    @Test("what a transport cannot check is refused at setup: pins on AsyncHTTPClient, any trust of your own on URLSession")
    func refusedAtSetup() throws {
        let pinned = ServerTrust(publicKeyPins: ["127.0.0.1": ["AAAA"]])
        #expect(throws: ServerTrustError.self) { _ = try AsyncHTTPClientTransport(trust: pinned) }
        #expect(throws: ServerTrustError.self) { _ = try URLSessionTransport(trust: try TLSServers.trust()) }
        #expect(throws: ServerTrustError.self) { _ = try URLSessionTransport(trust: pinned) }
        #expect(throws: ServerTrustError.self) { _ = try AsyncHTTPClientTransport(trust: ServerTrust(excludesSystemRoots: true)) }
        // Never weaker than asked: a configuration that verifies less is refused.
        for verification in [CertificateVerification.none, .noHostnameVerification] {
            var configuration = AsyncHTTPClientTransport.defaultConfiguration
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.certificateVerification = verification
            configuration.tlsConfiguration = tls
            #expect(throws: ServerTrustError.self, "\(verification)") {
                _ = try AsyncHTTPClientTransport(configuration: configuration, trust: try TLSServers.trust())
            }
        }
        #expect(throws: ServerTrustError.self) {
            _ = try ServerTrust(additionalRootsPEM: "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----")
        }
        #expect(throws: ServerTrustError.self) { _ = try ServerTrust(additionalRootsPEM: "no certificate here") }
        // The system default is accepted everywhere.
        _ = try URLSessionTransport(trust: .system)
    }

    @Test("HTTP/2: a server that shuts down (GOAWAY) mid-flight ends every call once, each with a response or a clear error, never unknown")
    func goAway() async throws {
        let server = try await DemoServer.start(tls: DemoTLS(certificate: try TLSServers.authority.get().issue()))
        let transport = try AsyncHTTPClientTransport(trust: try TLSServers.trust(), timeout: Timing.stretch(.seconds(20)))
        defer { Task { try? await transport.shutdown() } }
        let chain = try TLSServers.chain(server, transport)
        _ = try await chain.load(try APIRequest(.get, path: ["api", "users", "2"]))  // the connection is up
        // Time for the calls to be sent, also on a loaded machine (after 100 ms none had
        // been once, and all ten met the GOAWAY).
        let sent = Timing.stretch(0.5)
        let calls = (0..<10).map { index in
            Task { () -> Result<Int, CatenaError> in
                // Half finish within the server's 1 s grace period after the shutdown,
                // half outlast it (the shutdown comes after `sent`).
                let delay = index.isMultiple(of: 2) ? sent + 0.5 : sent + 5
                do throws(CatenaError) {
                    return .success(
                        try await chain.load(
                            try APIRequest(
                                .get, path: ["api", "users", "2"],
                                query: [URLQueryItem(name: "delay", value: String(delay))])
                        ).status.code)
                } catch {
                    return .failure(error)
                }
            }
        }
        try await Task.sleep(for: .seconds(sent))
        await server.stop()
        var outcomes: [String] = []
        for call in calls {
            switch await call.value {
            case .success(let status): outcomes.append("\(status)")
            case .failure(let error): outcomes.append("\(error.code)")
            }
        }
        // Seen: 200 for those within the grace period, connection lost for streams
        // the server closed, cannot connect for one sent after the GOAWAY.
        #expect(outcomes.allSatisfy { ["200", "connection lost", "cannot connect"].contains($0) }, "\(outcomes)")
        #expect(outcomes.contains("200"), "calls within the grace period complete: \(outcomes)")
        let after = await #expect(throws: CatenaError.self) { try await chain.load(try APIRequest(.get, path: ["api", "users", "2"])) }
        #expect(after?.code == .cannotConnect, "\(String(describing: after))")
    }

    @Test("HTTP/2: 64 requests at once share one connection on AsyncHTTPClient; a streamed 8 MiB body arrives whole")
    func http2() async throws {
        let server = try await TLSServers.running()
        let transport = try AsyncHTTPClientTransport(trust: try TLSServers.trust())
        defer { Task { try? await transport.shutdown() } }
        let chain = try TLSServers.chain(server, transport)
        let peers = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<64 {
                group.addTask {
                    let response = try await chain.load(try APIRequest(.get, path: ["api", "connection"], query: [URLQueryItem(name: "delay", value: "0.2")]))
                    return try JSONDecoder().decode(Peer.self, from: response.body).peer
                }
            }
            var peers = Set<String>()
            for try await peer in group { peers.insert(peer) }
            return peers
        }
        #expect(peers.count == 1, "HTTP/2 multiplexes: \(peers.count) connections for 64 concurrent requests")
        let streamed = try await chain.stream(try APIRequest(.get, path: ["api", "bytes", String(8 << 20)]))
        var count = 0
        for try await chunk in streamed.body { count += chunk.count }
        #expect(count == 8 << 20)
    }
}
