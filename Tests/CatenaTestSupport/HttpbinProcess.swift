import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// httpbin (PyPI's, under Werkzeug) on loopback: an HTTP server the project did not
/// write, whose `/cache`, `/cache/{n}`, `/etag/{tag}` and `/response-headers` routes
/// test a cache.
final class HttpbinProcess: Sendable {
    let port: Int
    private let pid: pid_t

    private init(port: Int, pid: pid_t) {
        self.port = port
        self.pid = pid
    }

    /// Whether the tests run: httpbin is there, or this is CI (where `.ci/run` installs
    /// it, and its absence must fail).
    static let testsRun = isInstalled || ProcessInfo.processInfo.environment["CI"] != nil

    static var isInstalled: Bool {
        (try? LocalProcess.exitStatus(["python3", "-c", "import httpbin, werkzeug.serving"])) == 0
    }

    var baseURL: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// httpbin on a free port, threaded (a cache's background refresh may overlap a call).
    static func start() async throws -> HttpbinProcess {
        let script = "import sys, httpbin, werkzeug.serving as s; s.run_simple('127.0.0.1', int(sys.argv[1]), httpbin.app, threaded=True)"
        guard let (pid, port) = try await LocalProcess.startListening({ ["python3", "-c", script, String($0)] }) else {
            throw LocalProcessError("httpbin did not start listening (is httpbin 0.10 installed? .ci/run installs it from PyPI)")
        }
        return HttpbinProcess(port: port, pid: pid)
    }

    func stop() {
        LocalProcess.terminate(pid)
    }
}
