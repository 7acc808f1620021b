@testable import Catena
import Foundation
import Testing
@testable import CatenaTestSupport
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Apple's URLSession names each exchange's connection in `URLSessionTaskMetrics`;
/// corelibs never delivers them, and neither lets a test make one. What Catena makes of
/// the metrics' values is tested here, and the call's handling of the connection through
/// the entry point the delegate calls, on a real exchange with the demo server.
@Suite("URLSession's task metrics")
struct URLSessionMetricsTests {
    let start = Date(timeIntervalSince1970: 1_800_000_000)

    func transaction(
        network: Bool = true, reused: Bool = false, connectAfter: Double? = 0.030, sentAfter: Double? = 0.031, alpn: String? = "h2",
        tls: UInt16? = 0x0304, cipher: UInt16? = 0x1301
    ) -> URLSessionTransaction {
        URLSessionTransaction(
            isNetworkLoad: network, isReused: reused, fetchStart: start, connectEnd: connectAfter.map { start + $0 },
            requestEnd: sentAfter.map { start + $0 }, remoteAddress: "192.0.2.7", remotePort: 443, localPort: 51234,
            protocolName: alpn, tlsVersion: tls, cipherSuite: cipher)
    }

    @Test("a new connection: its set-up from the fetch's start, the address, HTTP/2, TLS 1.3 and its cipher suite by name")
    func newConnection() throws {
        let seen = try #require(transaction().seen)
        #expect(
            seen.connection
                == ConnectionInfo(
                    isReused: false, readyAfter: .milliseconds(30), remoteAddress: "192.0.2.7", remotePort: 443, localPort: 51234,
                    httpVersion: "2", tlsVersion: "TLSv1.3", tlsCipherSuite: "TLS_AES_128_GCM_SHA256"))
        #expect(seen.requestSent == .milliseconds(31))
    }

    @Test("a reused connection has no set-up time, even where URLSession gave a connect date")
    func reused() throws {
        let seen = try #require(transaction(reused: true).seen)
        #expect(seen.connection.isReused)
        #expect(seen.connection.readyAfter == nil)
    }

    @Test("no connection from a transaction that did not go to the network, or whose protocol is missing or unknown")
    func noConnection() {
        #expect(transaction(network: false).seen == nil)
        #expect(transaction(alpn: nil).seen == nil)
        #expect(transaction(alpn: "spdy/3").seen == nil)
        #expect(transaction(alpn: "HTTP/1.1").seen?.connection.httpVersion == "1.1")
        #expect(transaction(alpn: "h3").seen?.connection.httpVersion == "3")
        #expect(transaction(alpn: "h3-29").seen?.connection.httpVersion == "3")
    }

    @Test("dates missing or out of order (a clock stepped) give no duration, and plain HTTP no TLS")
    func dates() throws {
        #expect(try #require(transaction(connectAfter: -1).seen).connection.readyAfter == nil)
        #expect(try #require(transaction(connectAfter: 90_000).seen).connection.readyAfter == nil)
        #expect(try #require(transaction(connectAfter: nil, sentAfter: nil).seen).requestSent == nil)
        let plain = try #require(transaction(alpn: "http/1.1", tls: nil, cipher: nil).seen).connection
        #expect(plain.tlsVersion == nil && plain.tlsCipherSuite == nil && plain.httpVersion == "1.1")
    }

    @Test("every TLS version and cipher suite number gets a name, or four hex digits")
    func everyNumber() {
        #expect(URLSessionTransaction.tlsName(0x0303) == "TLSv1.2")
        #expect(URLSessionTransaction.tlsName(0x7F1C) == "0x7F1C")
        #expect(URLSessionTransaction.cipherSuiteName(0xC013) == "0xC013")
        #expect(URLSessionTransaction.cipherSuiteName(0x000A) == "0x000A")
        #expect(URLSessionTransaction.cipherSuiteName(0xCCA8) == "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256")
        let named = Set((0...UInt16.max).map(URLSessionTransaction.cipherSuiteName)).filter { !$0.hasPrefix("0x") }
        #expect(named.count == 9)
        #expect(
            (0...UInt16.max).allSatisfy { number in
                let name = URLSessionTransaction.tlsName(number)
                return name.hasPrefix("TLSv") || name.hasPrefix("DTLSv") || (name.count == 6 && UInt16(name.dropFirst(2), radix: 16) == number)
            })
    }

    #if canImport(FoundationNetworking)
    // corelibs never delivers metrics, so only the calls below do. Apple's URLSession
    // delivers its own during these exchanges: the test after them checks those.

    /// One exchange through a call of Catena's session, `collect` run while the server
    /// holds the head back; its outcome and the connection events reported.
    func exchange(collect: @escaping @Sendable (URLSessionCall) -> Void) async throws -> (URLSessionCall.Outcome, Locked<[ConnectionInfo]>) {
        let server = try await TestServer.running()
        let events = Locked<[ConnectionInfo]>([])
        var request = try APIRequest(.get, baseURL: server.baseURL, path: ["api", "users", "2"], query: [URLQueryItem(name: "delay", value: "0.3")])
        request.observe(CallObserver { event in if case .connection(let connection) = event { events.withLock { $0.append(connection) } } })
        let owner = URLSessionOwner(configuration: URLSessionTransport.defaultConfiguration, shared: false)
        let call = URLSessionCall(request: request, timeout: .seconds(30), router: owner.router)
        let url = try request.url()
        let outcome = try await withCheckedThrowingContinuation { continuation in
            call.start(continuation: continuation) { owner.session.dataTask(with: URLRequest(url: url)) }
            collect(call)
        }
        return (outcome, events)
    }

    @Test("metrics delivered before the task completes: reported once, and the buffered answer's timing carries them")
    func collectedBeforeCompletion() async throws {
        let seen = try #require(transaction().seen)
        let (outcome, events) = try await exchange { $0.collected(seen) }
        #expect(outcome.response.statusCode == 200)
        #expect(events.withLock { $0 } == [seen.connection])
        #expect(outcome.timing?.connection == seen.connection)
        #expect(outcome.timing?.requestSent == seen.requestSent)
    }

    @Test("metrics after the answer was handed over (or none): nothing reported, nothing carried")
    func collectedAfterAnswer() async throws {
        let held = Locked<URLSessionCall?>(nil)
        let (outcome, events) = try await exchange { call in held.withLock { $0 = call } }
        #expect(outcome.timing?.connection == nil)
        let call = try #require(held.withLock { $0 })
        call.collected(try #require(transaction().seen))
        #expect(events.withLock { $0 }.isEmpty)
    }
    #else
    @Test("Apple's URLSession: a real exchange reports its connection once, and the buffered answer carries it")
    func appleMetrics() async throws {
        let server = try await TestServer.running()
        let events = Locked<[ConnectionInfo]>([])
        var request = try APIRequest(.get, baseURL: server.baseURL, path: ["api", "users", "2"])
        request.observe(CallObserver { event in if case .connection(let connection) = event { events.withLock { $0.append(connection) } } })
        let response = try await URLSessionTransport().load(request)
        let connection = try #require(response.timing?.connection)
        #expect(events.withLock { $0 } == [connection])
        #expect(connection.remoteAddress == "127.0.0.1" && connection.remotePort == server.port && connection.httpVersion == "1.1")
    }
    #endif
}
