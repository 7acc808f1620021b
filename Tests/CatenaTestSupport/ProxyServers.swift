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
    static let isInstalled = [Kind.tinyproxy, .dante].allSatisfy { executable($0.program) != nil }
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
        guard let program = executable(kind.program) else {
            throw ProxyProcessError("\(kind.program) is not installed: apt-get install tinyproxy dante-server (.ci/run does)")
        }
        // A port picked free can be taken before the proxy binds it: try a few.
        for _ in 0..<5 {
            let port = try freePort()
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catena-\(kind.rawValue)-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let (arguments, configuration) = configure(port, directory)
            try configuration.write(to: directory.appendingPathComponent("proxy.conf"), atomically: true, encoding: .utf8)
            let pid = try spawn(program, arguments.map { $0 == "proxy.conf" ? directory.appendingPathComponent("proxy.conf").path : $0 })
            let proxy = ProxyProcess(kind: kind, port: port, directory: directory, pid: pid)
            _ = await Timing.eventually(within: .seconds(10)) { !isRunning(pid) || accepts(port) }
            // Reaped by `isRunning` once it has ended: then never signalled (its pid may be anyone's).
            if isRunning(pid) {
                if accepts(port) { return proxy }
                proxy.stop()
            } else {
                try? FileManager.default.removeItem(at: directory)
            }
        }
        throw ProxyProcessError("\(kind.program) did not start listening on loopback")
    }

    /// Starts `program` with posix_spawn, not Foundation's Process: Dante closes every
    /// file descriptor as it starts, the one Process watches a child through among them,
    /// and Process's one monitor thread then blocks in waitpid for it, so that no other
    /// child process of the test run was ever seen to end. The child gets an empty signal
    /// mask and default handlers (a spawned child inherits the caller's blocked signals),
    /// and /dev/null for its standard streams.
    private static func spawn(_ program: String, _ arguments: [String]) throws -> pid_t {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t(), all = sigset_t()
        sigemptyset(&none)
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        // Nothing else of this process's: a pipe of a child another test is running,
        // held open by a proxy, would hide that child's end until the proxy is killed.
        // glibc 2.34's posix_spawn_file_actions_addclosefrom_np, which the Glibc module
        // does not declare.
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "posix_spawn_file_actions_addclosefrom_np") else {
            throw ProxyProcessError("this C library has no posix_spawn_file_actions_addclosefrom_np (glibc 2.34 or later)")
        }
        _ = unsafeBitCast(symbol, to: CloseFrom.self)(&actions, 3)
        let argv = ([program] + arguments).map { strdup($0) }
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, program, &actions, &attributes, argv + [nil], environ)
        guard result == 0 else { throw ProxyProcessError("posix_spawn \(program) failed: \(String(cString: strerror(result)))") }
        return pid
    }

    /// Whether the child `pid` is still running (reaped here when it has ended).
    private static func isRunning(_ pid: pid_t) -> Bool {
        var status: Int32 = 0
        return waitpid(pid, &status, WNOHANG) == 0
    }

    private static func executable(_ name: String) -> String? {
        ["/usr/bin/", "/usr/sbin/", "/usr/local/bin/", "/usr/local/sbin/"].map { $0 + name }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// A loopback port nobody listens on now.
    private static func freePort() throws -> Int {
        try boundPort(keep: false)
    }

    /// A loopback port bound for the rest of the run and never listened on: connecting to
    /// it is refused, and no other listener can take it.
    static func reservedPort() throws -> Int {
        try boundPort(keep: true)
    }

    private static func boundPort(keep: Bool) throws -> Int {
        let socket = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw ProxyProcessError("socket() failed") }
        defer { if !keep { close(socket) } }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) == 0 && getsockname(socket, $0, &length) == 0 }
        }
        guard bound else { throw ProxyProcessError("bind() to a free port failed") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Whether something accepts TCP connections on the loopback `port`.
    private static func accepts(_ port: Int) -> Bool {
        let socket = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { return false }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}

struct ProxyProcessError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
