import Catena
import Testing
import CatenaDemoServer
import Foundation

/// One misbehaving server for the whole test process.
enum FaultServer {
    private static let server = Task { try await MisbehavingServer.start() }

    static func running() async throws -> MisbehavingServer {
        try await server.value
    }
}

/// What a call to a fault must end with.
enum Expected: Sendable, CustomStringConvertible {
    case status(Int)
    case error(CatenaError.Code)

    var description: String {
        switch self {
        case .status(let code): "status \(code)"
        case .error(let code): "error \(code)"
        }
    }
}

extension MisbehavingServer.Fault {
    /// What every transport must make of this fault (with a 1 s timeout and a 1 MiB limit).
    var expected: Expected {
        switch self {
        // (identity, gzip: libcurl decodes it, NIO does not; a test of its own.)
        case .ok, .forgedConnection, .gzip, .interim, .interimLength, .identityGzip, .tinyChunks: .status(200)
        case .noContentWithBody: .status(204)
        case .truncated, .reset, .closeEarly, .cutAfterApply: .error(.connectionLost)
        case .garbage, .hugeHead, .badChunked, .badGzip, .twoLengths, .chunkedWithLength, .endless, .redirectLoop: .error(.invalidResponse)
        case .gzipBomb, .hugeGzipBomb, .largeGzipBomb: .error(.invalidResponse)
        // Never compressed bytes handed over as the body: an encoding no transport decodes fails.
        case .brotli, .layeredCoding: .error(.invalidResponse)
        case .silence, .slowHead, .slowBody: .error(.timedOut)
        case .basicChallenge, .digestChallenge, .negotiateChallenge, .bearerChallenge, .multipleChallenges: .status(401)
        case .proxyChallenge: .status(407)
        case .redirect, .slowTail: .status(200)
        case .hostileRateLimit: .status(429)
        case .hostileProblem: .status(500)
        }
    }
}

extension MisbehavingServer.Fault {
    /// 1 s for the faults that end in a timeout; long enough for the others that a
    /// loaded machine cannot turn their outcome into a timeout. Under ThreadSanitizer,
    /// with every fault at once, corelibs URLSession's six exchanges of the redirect
    /// loop once took longer than 10 s (CI, 11-26): 30 s there.
    var timeout: Duration {
        if case .error(.timedOut) = expected { .seconds(1) } else { Timing.isThreadSanitized ? .seconds(30) : .seconds(10) }
    }
}

/// A request to `fault` with its timeout and a 1 MiB body limit.
func faultRequest(_ fault: MisbehavingServer.Fault, on server: MisbehavingServer) -> APIRequest {
    var request = APIRequest(.get, url: server.url(fault))
    request[option: RequestTimeout.self] = fault.timeout
    request[option: MaximumResponseSize.self] = 1 << 20
    return request
}
