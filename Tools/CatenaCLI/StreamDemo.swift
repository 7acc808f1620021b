import ArgumentParser
import Catena
import Foundation

/// Server-sent events that survive dropped connections: tokens printed as they
/// arrive, the time to the first, and the reconnections the event source made.
struct StreamDemo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stream",
        abstract: "Server-sent events: print model-like tokens as they arrive, reconnecting with Last-Event-ID when the server cuts the stream.",
        discussion: """
            An event stream, as a chat completion API sends one: the tokens go through the same chain \
            as every other call; shows the time to the first token and each reconnection.
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Option(help: "How many tokens the server sends.")
    var count = 40

    @Option(help: "Seconds between tokens.")
    var interval = 0.05

    @Option(help: "The server cuts the connection after this many tokens of each connection (0 never).")
    var dropAfter = 15

    func validate() throws {
        guard (1...100_000).contains(count) else { throw ValidationError("--count must be 1...100000, not \(count)") }
        guard (0...5).contains(interval) else { throw ValidationError("--interval must be 0...5 seconds, not \(interval)") }
        guard dropAfter >= 0 else { throw ValidationError("--drop-after must be 0 or more, not \(dropAfter)") }
    }

    func run() async throws {
        await connection.runDemo { chain, server in try await runDemo(chain, server: server) }
    }

    func runDemo(_ chain: any HTTPLoader, server: ServerDescription) async throws {
        print("Server-sent events through the chain, reconnecting on their own")
        print("server     \(server.url)\(server.embedded ? " (embedded demo server)" : "")")
        print("transport  \(server.transport)")
        print()
        let request = try APIRequest(
            .get, path: ["api", "events"],
            query: [
                URLQueryItem(name: "count", value: String(count)), URLQueryItem(name: "interval", value: String(interval)),
                URLQueryItem(name: "drop_after", value: String(dropAfter)), URLQueryItem(name: "retry_ms", value: "200"),
                URLQueryItem(name: "end", value: "204"),
            ])
        let start = ContinuousClock.now
        let reconnections = Locked<[Reconnection]>([])
        let source = EventSource(request, loader: chain) { reconnection in
            reconnections.withLock { $0.append(reconnection) }
            let why = reconnection.reason.map { "\($0.code)" } ?? "stream closed"
            Terminal.write(
                "\n  ↻ \(why); reconnecting in \(Terminal.milliseconds(reconnection.delay)) with Last-Event-ID \(reconnection.lastEventID.isEmpty ? "(none)" : reconnection.lastEventID)\n  "
            )
        }
        var firstEvent: Duration?
        var tokens = 0
        Terminal.write("  ")
        for try await event in source {
            if firstEvent == nil { firstEvent = ContinuousClock.now - start }
            tokens += 1
            Terminal.write(event.data + " ")
        }
        let total = ContinuousClock.now - start
        print()
        print()
        let made = reconnections.withLock { $0 }
        print("tokens          \(tokens) of \(count)\(tokens == count ? ", each once" : "")")
        print("first token     \(firstEvent.map(Terminal.milliseconds) ?? "none")")
        let cut = made.filter { $0.reason != nil }.count
        print("reconnections   \(made.count): \(cut) after a failed connection, \(made.count - cut) after the server ended the stream")
        print("ended by        the server's 204 No Content")
        print("total           \(Terminal.milliseconds(total))")
    }
}
