import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Python's `websockets` (scripts/ws-server.py) on loopback: a WebSocket server the
/// project did not write, plain or over TLS.
final class WebSocketServerProcess: Sendable {
    let port: Int
    let secure: Bool
    private let pid: pid_t
    private let directory: URL

    private init(port: Int, secure: Bool, pid: pid_t, directory: URL) {
        self.port = port
        self.secure = secure
        self.pid = pid
        self.directory = directory
    }

    /// Whether the tests run: Python's `websockets` 13 or later is there, or this is CI
    /// (where `.ci/run` installs it, and its absence must fail).
    static let testsRun = isInstalled || ProcessInfo.processInfo.environment["CI"] != nil

    static var isInstalled: Bool {
        (try? LocalProcess.exitStatus(["python3", "-c", "import websockets.asyncio.server"])) == 0
    }

    /// A `ws://` (or with `certificatePEM` and `keyPEM`, `wss://`) URL of `path` on it.
    func url(_ path: String) -> String {
        "\(secure ? "wss" : "ws")://127.0.0.1:\(port)\(path)"
    }

    /// The server on a free port; over TLS with the certificate and key given, and then
    /// requiring a client certificate from `clientAuthorityPEM` when given.
    static func start(certificatePEM: String? = nil, keyPEM: String? = nil, clientAuthorityPEM: String? = nil) async throws -> WebSocketServerProcess {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appending(path: "scripts/ws-server.py").path
        let directory = FileManager.default.temporaryDirectory.appending(path: "catena-ws-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var tls: [String] = []
        if let certificatePEM, let keyPEM {
            try certificatePEM.write(to: directory.appending(path: "cert.pem"), atomically: true, encoding: .utf8)
            try keyPEM.write(to: directory.appending(path: "key.pem"), atomically: true, encoding: .utf8)
            tls = ["--cert", directory.appending(path: "cert.pem").path, "--key", directory.appending(path: "key.pem").path]
            if let clientAuthorityPEM {
                try clientAuthorityPEM.write(to: directory.appending(path: "client-ca.pem"), atomically: true, encoding: .utf8)
                tls += ["--client-ca", directory.appending(path: "client-ca.pem").path]
            }
        }
        // Through env, so the python3 on PATH runs: the one `.ci/run` installed websockets for.
        guard let (pid, port) = try await LocalProcess.startListening({ ["python3", script, "--port", String($0)] + tls }) else {
            try? FileManager.default.removeItem(at: directory)
            throw LocalProcessError("scripts/ws-server.py did not start listening (is Python's websockets 13 or later installed? .ci/run installs it)")
        }
        return WebSocketServerProcess(port: port, secure: !tls.isEmpty, pid: pid, directory: directory)
    }

    func stop() {
        LocalProcess.terminate(pid)
        try? FileManager.default.removeItem(at: directory)
    }
}
