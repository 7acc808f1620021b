import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A real proxy on loopback, started by a test: tinyproxy (HTTP, `CONNECT`, Basic
/// authentication) or Dante (SOCKS5), from Debian's packages, which `.ci/run` installs.
/// Each logs the connections it makes, so a test can tell what went through it.
final class ProxyProcess: Sendable {
    enum Kind: String, Sendable {
        case tinyproxy, dante
        var program: String { self == .tinyproxy ? "tinyproxy" : "danted" }
    }

    let kind: Kind
    let port: Int
    private let directory: URL
    private let pid: Int32

    /// Whether both proxies are installed; under CI they must be (`.ci/run` installs
    /// them), elsewhere their tests are skipped without them.
    static let isInstalled = [Kind.tinyproxy, .dante].allSatisfy { LocalProcess.executable($0.program) != nil }
    static let testsRun = isInstalled || ProcessInfo.processInfo.environment["CI"] != nil

    private init(kind: Kind, port: Int, directory: URL, pid: Int32) {
        self.kind = kind
        self.port = port
        self.directory = directory
        self.pid = pid
    }

    /// tinyproxy on a free port, asking for `user` and `password` when given.
    static func tinyproxy(user: String? = nil, password: String? = nil) async throws -> ProxyProcess {
        try await start(.tinyproxy) { port, directory in
            var lines = ["Port \(port)", "Listen 127.0.0.1", "Timeout 60", "MaxClients 200", "LogLevel Connect"]
            lines.append("LogFile \"\(directory.appendingPathComponent("proxy.log").path)\"")
            if let user, let password { lines.append("BasicAuth \(user) \(password)") }
            return (["-d", "-c", "proxy.conf"], lines.joined(separator: "\n") + "\n")
        }
    }

    /// Dante, a SOCKS5 proxy without authentication, on a free port.
    static func dante() async throws -> ProxyProcess {
        try await start(.dante) { port, directory in
            let configuration = """
                logoutput: \(directory.appendingPathComponent("proxy.log").path)
                internal: 127.0.0.1 port = \(port)
                external: 127.0.0.1
                socksmethod: none
                clientmethod: none
                client pass { from: 127.0.0.0/8 to: 0.0.0.0/0 log: connect }
                socks pass { from: 127.0.0.0/8 to: 0.0.0.0/0 log: connect }

                """
            return (["-f", "proxy.conf", "-N", "1"], configuration)
        }
    }

    /// What the proxy has logged so far.
    var log: String {
        (try? String(contentsOf: directory.appendingPathComponent("proxy.log"), encoding: .utf8)) ?? ""
    }

    /// Whether the log lists a connection to `port` on loopback: tinyproxy writes
    /// `CONNECT 127.0.0.1:PORT`, Dante `-> … 127.0.0.1.PORT`.
    func logged(port target: Int) -> Bool {
        kind == .tinyproxy
            ? log.contains("CONNECT 127.0.0.1:\(target) ") || log.contains("CONNECT localhost:\(target) ") : log.contains("127.0.0.1.\(target)\n")
    }

    /// Waits until the log lists a connection to `port` (the proxy writes it as the
    /// tunnel opens, a moment after the client may already have its answer).
    func eventuallyLogged(port target: Int) async -> Bool {
        await Timing.eventually(within: .seconds(5)) { self.logged(port: target) }
    }

    /// Ends the proxy and reaps it.
    func stop() {
        kill(pid, SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        try? FileManager.default.removeItem(at: directory)
    }

    private static func start(_ kind: Kind, configure: (Int, URL) -> (arguments: [String], configuration: String)) async throws -> ProxyProcess {
        guard let program = LocalProcess.executable(kind.program) else {
            throw ProxyProcessError("\(kind.program) is not installed: apt-get install tinyproxy dante-server (.ci/run does)")
        }
        // A port picked free can be taken before the proxy binds it: try a few.
        for _ in 0..<5 {
            let port = try LocalProcess.freePort()
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catena-\(kind.rawValue)-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let (arguments, configuration) = configure(port, directory)
            try configuration.write(to: directory.appendingPathComponent("proxy.conf"), atomically: true, encoding: .utf8)
            let pid = try LocalProcess.spawn(program, arguments.map { $0 == "proxy.conf" ? directory.appendingPathComponent("proxy.conf").path : $0 })
            let proxy = ProxyProcess(kind: kind, port: port, directory: directory, pid: pid)
            _ = await Timing.eventually(within: .seconds(10)) { !LocalProcess.isRunning(pid) || LocalProcess.accepts(port) }
            // Reaped by `isRunning` once it has ended: then never signalled (its pid may be anyone's).
            if LocalProcess.isRunning(pid) {
                if LocalProcess.accepts(port) { return proxy }
                proxy.stop()
            } else {
                try? FileManager.default.removeItem(at: directory)
            }
        }
        throw ProxyProcessError("\(kind.program) did not start listening on loopback")
    }
}

struct ProxyProcessError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
