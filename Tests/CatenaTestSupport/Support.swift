import Catena
import AsyncHTTPClient
import CatenaAsyncHTTPClient
import CatenaDemoServer
import Foundation
import Testing
import ThreadSanitizerSuppressions

/// One demo server for the whole test process, started on first use on 127.0.0.1
/// with a port the system picks.
enum TestServer {
    private static let server = Task { try await DemoServer.start() }
    private static let webSocketServer = Task { try await DemoServer.start(webSockets: true) }

    /// A demo server that serves its `/ws/…` routes too.
    static func withWebSockets() async throws -> RunningDemoServer {
        try await webSocketServer.value
    }

    static func running() async throws -> RunningDemoServer {
        try await server.value
    }

    static func environment() async throws -> ServerEnvironment {
        try #require(ServerEnvironment(baseURL: try await running().baseURL))
    }

    /// "127.0.0.1:port": the origin an auth loader's `hosts` names for the test server.
    static func authority() async throws -> String {
        "127.0.0.1:\(try await running().port)"
    }

    /// A port nothing listens on, and nothing can start to: bound by this process for its
    /// whole run and never listened on, so connecting is refused. A stopped server's port
    /// would not do: a proxy or server another test starts may be given it.
    static func closedPort() async throws -> Int {
        try boundPort.get()
    }

    private static let boundPort = Result { () throws -> Int in
        try LocalProcess.reservedPort()
    }
}

/// The transports the shared behaviour suites run against.
enum TransportKind: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case asyncHTTPClient, urlSession
    /// AsyncHTTPClient over HTTPS and HTTP/2 to the TLS demo server, trusting its
    /// authority through ServerTrust. Not in `allCases` (tests that build their own
    /// URLs to the plain server use those): suites that reach the server only
    /// through `chain()` run `withHTTPS`. URLSession has no HTTPS kind: on Linux it
    /// trusts the system store only (TLSTests pins that down).
    case asyncHTTPClientHTTPS

    static var allCases: [TransportKind] { [.asyncHTTPClient, .urlSession] }
    /// Both transports over plain HTTP/1.1, and AsyncHTTPClient over HTTPS and HTTP/2;
    /// under ThreadSanitizer the plain ones only. There, BoringSSL's instrumented
    /// handshakes on the event loops that the in-process server shares slowed the
    /// whole run (93 s instead of 77) until unrelated timing tests failed, and the
    /// HTTPS kind runs no Catena code the plain kinds do not (TLS is AsyncHTTPClient's):
    /// TLSTests still runs under it.
    static var withHTTPS: [TransportKind] { Timing.isThreadSanitized ? allCases : allCases + [.asyncHTTPClientHTTPS] }

    var testDescription: String { rawValue }

    /// A transport of this kind. The default timeout is a safety net, not a measure:
    /// under ThreadSanitizer an 8 MiB transfer at the run's busy start took over 30 s.
    func make(timeout: Duration = Timing.isThreadSanitized ? .seconds(90) : .seconds(30)) -> any HTTPLoader {
        switch self {
        case .asyncHTTPClient: AsyncHTTPClientTransport.forTests(timeout: timeout)
        case .urlSession: URLSessionTransport(timeout: timeout)
        case .asyncHTTPClientHTTPS: AsyncHTTPClientTransport(watchedClient: TLSServers.client, decodesCompression: true, timeout: timeout)
        }
    }

    /// A chain to the shared demo server through this transport.
    func chain(timeout: Duration = Timing.isThreadSanitized ? .seconds(90) : .seconds(30)) async throws -> any HTTPLoader {
        let server = self == .asyncHTTPClientHTTPS ? try await TLSServers.running() : try await TestServer.running()
        return EnvironmentMiddleware(try #require(ServerEnvironment(baseURL: server.baseURL))) --> make(timeout: timeout)
    }
}

/// What `/api/echo` reports about the request it received.
struct Echo: Decodable {
    let method: String
    let path: String
    let query: String
    let headers: [String: String]
    let body: String?
    let bodyEncoding: String
    let bodyLength: Int
    let bodyChecksum: String

    func header(_ name: String) -> String? {
        headers.first { $0.key.lowercased() == name.lowercased() }?.value
    }
}

/// `count` bytes where byte i is i % 251, as the demo server's /api/bytes sends them.
/// Built a period at a time: byte-at-a-time loops are slow in debug builds and would
/// starve the other tests of the cooperative pool's two threads.
func patternData(_ count: Int) -> Data {
    let period = Data((0..<251).map { UInt8($0) })
    var data = Data(capacity: count)
    while data.count + period.count <= count { data.append(period) }
    data.append(period.prefix(count - data.count))
    return data
}

/// `count` bytes of random content: a 64 KiB random block, repeated with a counter
/// byte between repeats so no two blocks line up the same way.
func randomData(_ count: Int) -> Data {
    var generator = SystemRandomNumberGenerator()
    var block = [UInt8](repeating: 0, count: 65_536)
    for index in stride(from: 0, to: block.count, by: 8) {
        withUnsafeBytes(of: generator.next() as UInt64) { block.replaceSubrange(index..<index + 8, with: $0) }
    }
    var data = Data(capacity: count)
    var counter: UInt8 = 0
    while data.count < count {
        data.append(contentsOf: block.prefix(count - data.count))
        counter &+= 1
        if data.count < count { data.append(counter) }
    }
    return data
}

/// Time limits for "ended at once, not waited out" checks.
///
/// Each such test pairs a server hold (what waiting it out would take) with a smaller
/// bound; both are stretched by the same factor under ThreadSanitizer, which runs the
/// whole suite 5 to 15 times slower on CI's two cores. A bound stays below its hold,
/// so the test can still fail.
enum Timing {
    /// Whether this process runs under ThreadSanitizer (its runtime is linked in).
    static let isThreadSanitized: Bool = {
        #if os(Linux)
        return dlsym(nil, "__tsan_init") != nil
        #else
        return dlsym(UnsafeMutableRawPointer(bitPattern: -2), "__tsan_init") != nil
        #endif
    }()

    static let factor: Double = isThreadSanitized ? 8 : 1

    /// The suppressions ThreadSanitizer reads at start-up, named here so the linker
    /// keeps them in the test process.
    static let suppressions = __tsan_default_suppressions

    static func stretch(_ seconds: Double) -> Double { seconds * factor }
    static func stretch(_ duration: Duration) -> Duration { duration * factor }

    /// Polls `condition` until it holds or `limit` (stretched) passes.
    static func eventually(within limit: Duration = .seconds(15), _ condition: () async throws -> Bool) async rethrows -> Bool {
        let deadline = ContinuousClock.now + stretch(limit)
        while ContinuousClock.now < deadline {
            if try await condition() { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return try await condition()
    }
}

extension AsyncHTTPClientTransport {
    /// The suite's client: Catena's default configuration with 64 connections per host
    /// instead of AsyncHTTPClient's 8. Some sixty suites run at once against one
    /// server, several holding connections for seconds (longer under ThreadSanitizer);
    /// with 8, a request could wait in the pool past AsyncHTTPClient's 10 s
    /// connection-creation timeout and fail for another test's sake.
    static var forTestsClient: HTTPClient { testClient }

    private static let testClient: HTTPClient = {
        var configuration = AsyncHTTPClientTransport.defaultConfiguration
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 64
        // Under ThreadSanitizer, the first seconds of the run (sixty suites starting at
        // once against the in-process server) kept new connections waiting past the 10 s
        // connection timeout, at stop 48's code too (2026-11-28): the suite's client waits longer.
        if Timing.isThreadSanitized { configuration.timeout.connect = .seconds(60) }
        // Watched as the clients Catena makes are: every suite's exchange goes past the handler.
        return HTTPClient(eventLoopGroup: .singletonMultiThreadedEventLoopGroup, configuration: AsyncHTTPClientTransport.watching(configuration))
    }()

    /// A transport over the suite's client (see `testClient`).
    static func forTests(timeout: Duration = .seconds(60)) -> AsyncHTTPClientTransport {
        AsyncHTTPClientTransport(watchedClient: testClient, decodesCompression: true, timeout: timeout)
    }
}

extension Result {
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}

/// Turns at corelibs URLSession, for the tests that send it bombs and the tests that
/// time its next call. corelibs runs every session's libcurl work on one serial queue:
/// a bomb another suite's session inflates holds up every URLSession call in the
/// process, whatever the session, long enough to time a 1 s call out. Other transports
/// run at once.
enum CorelibsTurns {
    private static let gate = Gate()

    static func take<T: Sendable>(_ kind: TransportKind, _ body: () async throws -> T) async rethrows -> T {
        guard kind == .urlSession else { return try await body() }
        await gate.enter()
        do {
            let result = try await body()
            await gate.leave()
            return result
        } catch {
            await gate.leave()
            throw error
        }
    }

    /// One holder at a time, the others queued in order.
    private actor Gate {
        private var held = false
        private var waiting: [CheckedContinuation<Void, Never>] = []

        func enter() async {
            guard held else {
                held = true
                return
            }
            await withCheckedContinuation { waiting.append($0) }
        }

        func leave() {
            if waiting.isEmpty { held = false } else { waiting.removeFirst().resume() }
        }
    }
}

/// Reads `socket`'s messages to their end: the messages, and the error the loop threw.
func drain(_ socket: WebSocket) async -> ([WebSocketMessage], CatenaError?) {
    var messages: [WebSocketMessage] = []
    do {
        for try await message in socket.messages { messages.append(message) }
        return (messages, nil)
    } catch {
        return (messages, error)
    }
}
