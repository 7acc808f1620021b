// The demo server in a process of its own, for the benchmark programs: the client's
// CPU time and event loops are then the client's alone.
public import Foundation

/// A child process running the calling program with `--serve`, which starts the demo
/// server and prints its base URL on one line (each program handles the flag itself).
public struct ServerProcess {
    /// Where the server listens.
    public let baseURL: URL
    private let process: Process
    private let lifeline: Pipe

    /// Starts this program again with `--serve` and waits for the line that says where
    /// it listens. `environment` replaces this process's (to drop `LD_PRELOAD`, say).
    public init(environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        process.arguments = ["--serve"]
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        // Held open for as long as this process lives: the child ends at its end of file
        // (`endWithParent()`), so a benchmark that crashes leaves no server behind.
        let lifeline = Pipe()
        process.standardInput = lifeline
        try process.run()
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            guard !chunk.isEmpty else { throw ServerProcessError(detail: "the server process ended before it said where it listens") }
            line.append(chunk)
        }
        let text = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard let url = URL(string: text) else {
            process.terminate()
            process.waitUntilExit()
            throw ServerProcessError(detail: "the server process said \(text.debugDescription), not a URL")
        }
        self.baseURL = url
        self.process = process
        self.lifeline = lifeline
    }

    /// In the child (`--serve`): starts the server with `start`, prints the base URL
    /// `url` gives for it on one line, and serves until the parent ends.
    public static func serve<Server>(_ start: @Sendable () async throws -> Server, url: @Sendable (Server) -> URL) async throws -> Never {
        let server = try await start()
        print(url(server).absoluteString)
        fflush(nil)
        endWithParent()
        while true {
            try await Task.sleep(for: .seconds(3600))
            withExtendedLifetime(server) {}
        }
    }

    /// In the child: ends this process once the parent's end of its standard input
    /// closes, which happens when the parent ends, however it ends.
    static func endWithParent() {
        Thread.detachNewThread {
            while !FileHandle.standardInput.availableData.isEmpty {}
            exit(0)
        }
    }

    /// Stops the server and waits for its process to end.
    public func stop() {
        process.terminate()
        process.waitUntilExit()
    }
}

/// The server process did not start as expected.
public struct ServerProcessError: Error, CustomStringConvertible {
    public let detail: String
    public var description: String { detail }
}
