import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Programs from Debian's packages that tests start on loopback (proxies, an OpenID
/// provider): spawning, reaping and ports.
enum LocalProcess {
    /// Starts `program` with posix_spawn, not Foundation's Process: Dante closes every
    /// file descriptor as it starts, the one Process watches a child through among them,
    /// and Process's one monitor thread then blocks in waitpid for it, so that no other
    /// child process of the test run was ever seen to end. The child gets an empty signal
    /// mask and default handlers (a spawned child inherits the caller's blocked signals),
    /// and /dev/null for its standard streams.
    static func spawn(_ program: String, _ arguments: [String]) throws -> pid_t {
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
            throw LocalProcessError("this C library has no posix_spawn_file_actions_addclosefrom_np (glibc 2.34 or later)")
        }
        _ = unsafeBitCast(symbol, to: CloseFrom.self)(&actions, 3)
        let argv = ([program] + arguments).map { strdup($0) }
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, program, &actions, &attributes, argv + [nil], environ)
        guard result == 0 else { throw LocalProcessError("posix_spawn \(program) failed: \(String(cString: strerror(result)))") }
        return pid
    }

    /// Runs `arguments` through env (so the python3 on PATH, the one `.ci/run` installed
    /// packages for) and returns its exit status, -1 when a signal ended it.
    static func exitStatus(_ arguments: [String]) throws -> Int32 {
        let pid = try spawn("/usr/bin/env", arguments)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        return (status & 0x7F) == 0 ? (status >> 8) & 0xFF : -1
    }

    /// Starts the program `arguments(port)` names, through env, on a free loopback port,
    /// until one listens there (five tries of up to 20 s); nil when none did.
    static func startListening(_ arguments: (_ port: Int) -> [String]) async throws -> (pid: pid_t, port: Int)? {
        for _ in 0..<5 {
            let port = try freePort()
            let pid = try spawn("/usr/bin/env", arguments(port))
            _ = await Timing.eventually(within: .seconds(20)) { !isRunning(pid) || accepts(port) }
            // isRunning reaps a child that ended: then its pid is no longer ours to signal.
            guard isRunning(pid) else { continue }
            if accepts(port) { return (pid, port) }
            terminate(pid)
        }
        return nil
    }

    /// Ends the child `pid` and reaps it.
    static func terminate(_ pid: pid_t) {
        kill(pid, SIGTERM)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
    }

    /// Whether the child `pid` is still running (reaped here when it has ended).
    static func isRunning(_ pid: pid_t) -> Bool {
        var status: Int32 = 0
        return waitpid(pid, &status, WNOHANG) == 0
    }

    static func executable(_ name: String) -> String? {
        ["/usr/bin/", "/usr/sbin/", "/usr/local/bin/", "/usr/local/sbin/"].map { $0 + name }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// A loopback port nobody listens on now.
    static func freePort() throws -> Int {
        try boundPort(keep: false)
    }

    /// A loopback port bound for the rest of the run and never listened on: connecting to
    /// it is refused, and no other listener can take it.
    static func reservedPort() throws -> Int {
        try boundPort(keep: true)
    }

    static func boundPort(keep: Bool) throws -> Int {
        let socket = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw LocalProcessError("socket() failed") }
        defer { if !keep { close(socket) } }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) == 0 && getsockname(socket, $0, &length) == 0 }
        }
        guard bound else { throw LocalProcessError("bind() to a free port failed") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Whether something accepts TCP connections on the loopback `port`.
    static func accepts(_ port: Int) -> Bool {
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

struct LocalProcessError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
