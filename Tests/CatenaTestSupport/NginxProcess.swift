import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// nginx from Debian's packages on loopback, started by a test with `server` locations
/// of its own: a server the project did not write. It logs each request's arrival
/// time, so a test can tell what reached it and when.
final class NginxProcess: Sendable {
    let port: Int
    private let directory: URL
    private let pid: Int32

    static let isInstalled = LocalProcess.executable("nginx") != nil
    static let testsRun = isInstalled || ProcessInfo.processInfo.environment["CI"] != nil

    /// Whether it serves HTTPS.
    let tls: Bool
    var baseURL: URL { URL(string: "\(tls ? "https" : "http")://127.0.0.1:\(port)")! }

    private init(port: Int, directory: URL, pid: Int32, tls: Bool) {
        self.port = port
        self.directory = directory
        self.pid = pid
        self.tls = tls
    }

    /// What nginx serves over TLS: its certificate and key, and whether ALPN offers HTTP/2.
    struct TLS {
        var certificatePEM: String
        var privateKeyPEM: String
        var http2: Bool
    }

    /// nginx with `locations` (nginx configuration inside its `server` block) on a free
    /// port, over TLS when `tls` is given.
    static func start(locations: String, tls: TLS? = nil) async throws -> NginxProcess {
        guard let program = LocalProcess.executable("nginx") else {
            throw LocalProcessError("nginx is not installed: apt-get install nginx-light (.ci/run does)")
        }
        for _ in 0..<5 {
            let port = try LocalProcess.freePort()
            let directory = FileManager.default.temporaryDirectory.appending(path: "catena-nginx-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory.appending(path: "html"), withIntermediateDirectories: true)
            let root = directory.path
            var listen = "listen 127.0.0.1:\(port);"
            if let tls {
                try tls.certificatePEM.write(to: directory.appending(path: "server.pem"), atomically: true, encoding: .utf8)
                try tls.privateKeyPEM.write(to: directory.appending(path: "server.key"), atomically: true, encoding: .utf8)
                // `http2` on the listen line: nginx 1.22 (Debian 12) knows no `http2 on;`.
                listen = """
                    listen 127.0.0.1:\(port) ssl\(tls.http2 ? " http2" : "");
                            ssl_certificate \(root)/server.pem;
                            ssl_certificate_key \(root)/server.key;
                    """
            }
            // One process, in the foreground, everything it writes in its own folder.
            let configuration = """
                daemon off;
                master_process off;
                pid \(root)/nginx.pid;
                error_log \(root)/error.log warn;
                events { worker_connections 256; }
                http {
                    log_format arrivals '$msec $status $request_method $request_uri';
                    access_log \(root)/access.log arrivals;
                    client_body_temp_path \(root)/body;
                    proxy_temp_path \(root)/proxy;
                    fastcgi_temp_path \(root)/fastcgi;
                    uwsgi_temp_path \(root)/uwsgi;
                    scgi_temp_path \(root)/scgi;
                    server {
                        \(listen)
                        root \(root)/html;
                \(locations)
                    }
                }

                """
            try configuration.write(to: directory.appending(path: "nginx.conf"), atomically: true, encoding: .utf8)
            let pid = try LocalProcess.spawn(program, ["-p", root, "-c", directory.appending(path: "nginx.conf").path])
            let server = NginxProcess(port: port, directory: directory, pid: pid, tls: tls != nil)
            _ = await Timing.eventually(within: .seconds(10)) { !LocalProcess.isRunning(pid) || LocalProcess.accepts(port) }
            if LocalProcess.isRunning(pid) {
                if LocalProcess.accepts(port) { return server }
                server.stop()
            } else {
                try? FileManager.default.removeItem(at: directory)
            }
        }
        throw LocalProcessError("nginx did not start listening on loopback")
    }

    /// A file nginx serves from its root.
    func write(_ data: Data, at path: String, modified: Date? = nil) throws {
        let url = directory.appending(path: "html").appending(path: path)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: url)
        // nginx's Last-Modified is the file's modification time.
        if let modified { try FileManager.default.setAttributes([.modificationDate: modified], ofItemAtPath: url.path) }
    }

    /// Each request that reached it so far: when (seconds since 1970), status, method and URI.
    var arrivals: [(time: Double, status: Int, method: String, uri: String)] {
        let text = (try? String(contentsOf: directory.appending(path: "access.log"), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let parts = line.split(separator: " ", maxSplits: 3)
            guard parts.count == 4, let time = Double(parts[0]), let status = Int(parts[1]) else { return nil }
            return (time, status, String(parts[2]), String(parts[3]))
        }
    }

    /// Ends nginx and reaps it.
    func stop() {
        kill(pid, SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        try? FileManager.default.removeItem(at: directory)
    }
}
