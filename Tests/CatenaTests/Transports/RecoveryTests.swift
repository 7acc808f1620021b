import Catena
import CatenaAsyncHTTPClient
import CatenaDemoServer
import Foundation
import Testing
@testable import CatenaTestSupport

/// After a hostile answer the next call to the same server works at once: within 1 s
/// (its timeout), on the same transport, on both transports. Each test gets transports
/// of its own, and URLSession's cases take turns with the suites that send it bombs
/// (``CorelibsTurns``): corelibs shares one queue between all sessions.
@Suite("Recovery after hostile answers", .serialized)
struct RecoveryTests {
    static func transport(_ kind: TransportKind) -> any HTTPLoader {
        kind == .urlSession
            ? URLSessionTransport(configuration: URLSessionTransport.defaultConfiguration, timeout: .seconds(30))
            : AsyncHTTPClientTransport(configuration: AsyncHTTPClientTransport.defaultConfiguration, timeout: .seconds(30))
    }

    /// A normal call with a 3 s timeout (stretched under ThreadSanitizer) must answer:
    /// the timeout is what holds it to 3 s (a later answer is `timedOut`, not 200); 1 s
    /// was passed by a full run's load. The
    /// margin is for the timer's own lateness on a loaded run (250 ms was passed by 8 ms in a full run).
    static func nextCallAnswers(_ transport: any HTTPLoader, _ server: MisbehavingServer, after what: String, kind: TransportKind) async {
        var request = faultRequest(.ok, on: server)
        request[option: RequestTimeout.self] = Timing.stretch(.seconds(3))
        await expectOutcome(transport, request, .status(200), "\(kind) ok after \(what)", margin: .seconds(1))
    }

    /// The 512 MiB bomb on AsyncHTTPClient only: corelibs runs every URLSession's
    /// libcurl calls on one serial queue, and libcurl inflates all the bytes one socket
    /// read brought in one call, delivering each 16 KiB to a write callback that cannot
    /// stop it; a cancelled 512 MiB bomb holds that queue for about 1.5 s, whatever the
    /// session (HostileServers: "What a transport cannot stop").
    @Test("after a gzip bomb stopped at the size limit", arguments: TransportKind.allCases)
    func afterBomb(kind: TransportKind) async throws {
        try await CorelibsTurns.take(kind) {
            let server = try await FaultServer.running()
            let transport = Self.transport(kind)
            let large: MisbehavingServer.Fault = kind == .urlSession || Timing.isThreadSanitized ? .gzipBomb : .largeGzipBomb
            for fault in Set([MisbehavingServer.Fault.gzipBomb, large]) {
                await expectOutcome(transport, faultRequest(fault, on: server), .error(.invalidResponse), "\(kind) \(fault)")
                await Self.nextCallAnswers(transport, server, after: "\(fault)", kind: kind)
            }
        }
    }

    @Test("after a body whose gzip data is corrupt, which fails as an invalid response", arguments: TransportKind.allCases)
    func afterCorruptGzip(kind: TransportKind) async throws {
        try await CorelibsTurns.take(kind) {
            let server = try await FaultServer.running()
            let transport = Self.transport(kind)
            await expectOutcome(transport, faultRequest(.badGzip, on: server), .error(.invalidResponse), "\(kind) bad gzip", margin: .seconds(1))
            await Self.nextCallAnswers(transport, server, after: "bad gzip", kind: kind)
        }
    }

    @Test("after 50 hostile calls at once", arguments: TransportKind.allCases)
    func afterFifty(kind: TransportKind) async throws {
        try await CorelibsTurns.take(kind) {
            let server = try await FaultServer.running()
            let transport = Self.transport(kind)
            let hostile: [MisbehavingServer.Fault] = [
                .gzipBomb, .badGzip, .endless, .garbage, .reset, .truncated, .badChunked, .hugeHead, .twoLengths, .closeEarly,
            ]
            await withTaskGroup(of: Void.self) { group in
                for index in 0..<50 {
                    let fault = hostile[index % hostile.count]
                    group.addTask { await expectOutcome(transport, faultRequest(fault, on: server), fault.expected, "\(kind) \(fault)") }
                }
            }
            await Self.nextCallAnswers(transport, server, after: "50 hostile calls", kind: kind)
        }
    }
}
