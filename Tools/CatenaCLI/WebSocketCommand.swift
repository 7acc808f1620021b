import ArgumentParser
import Catena
import CatenaTesting
import Foundation

/// `catena ws URL`: lines of standard input go out as text messages; messages come
/// out on standard output, one a line.
struct WebSocketCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ws",
        abstract: "Open a WebSocket: lines of standard input go out as text messages, messages come out on standard output.",
        discussion: """
            The upgrade goes through the same options as a call (-H, --bearer, --auth, --proxy, --pinnedpubkey, --cert, \
            --unix-socket, --har, -v); --timeout bounds the handshake. At the end of standard input the command waits until \
            the server closes or --linger seconds pass without a message, then closes (1000). Exit status: 0 after an \
            orderly close; 4 or 5 when the server refused the upgrade with a 4xx or 5xx; 9 when it closed with another code \
            than 1000 or 1001; 8 when it broke the protocol; 7, 28, 35 or 60 as for a call.
            """)

    @Argument(help: "The URL: ws, wss, http or https.")
    var url: String

    @Option(name: .customLong("subprotocol"), help: "Offer this subprotocol (repeatable, most wanted first).")
    var subprotocols: [String] = []

    @Flag(help: "Offer permessage-deflate (RFC 7692); -i shows whether the server took it.")
    var compressed = false

    @Option(help: "Seconds to wait for messages after standard input ends.")
    var linger: Double = 1

    @OptionGroup var call: RequestCall

    func validate() throws {
        guard linger >= 0, linger <= 3600 else { throw ValidationError("--linger must be 0...3600 seconds") }
        guard call.json == nil, call.jsonFile == nil, call.formFields.isEmpty, call.upload == nil else {
            throw ValidationError("ws sends no body: its messages come from standard input")
        }
        guard call.writeOut == nil else { throw ValidationError("ws has no -w: its messages are its output") }
        guard call.transport == .ahc else {
            throw ValidationError("ws needs --transport ahc: URLSession opens no WebSockets on Linux")
        }
    }

    func run() async throws {
        await call.exit { recorder in try await converse(recorder: recorder) }
    }

    private func converse(recorder: HARRecorder?) async throws -> ExitStatus {
        var request = try call.makeRequest(method: "GET", url: url)
        let redaction = Redaction.effective(for: request)
        let (chain, shutdown) = try call.makeChain(for: &request, recorder: recorder, redaction: redaction)
        defer { Task { try? await shutdown() } }
        var options = WebSocketOptions()
        options.subprotocols = subprotocols
        if compressed { options.compression = .deflate }
        let socket = try await chain.webSocket(request, options: options)
        if call.include {
            let head = headText(status: socket.response.status, fields: socket.response.headerFields, redaction: redaction)
            StandardError.writeText(head)
        }
        let lines = Self.standardInputLines()
        let lastHeard = Locked(ContinuousClock.now)
        let quiet = Duration.milliseconds(Int64((linger * 1000).rounded()))
        let sending = Task {
            for await line in lines {
                do { try await socket.send(text: line) } catch { return }
            }
            // Standard input ended: answers may still come, until the socket is quiet.
            lastHeard.withLock { $0 = max($0, .now) }
            while true {
                let silence = ContinuousClock.now - lastHeard.withLock { $0 }
                guard silence < quiet else { break }
                do { try await Task.sleep(for: quiet - silence) } catch { return }
            }
            await socket.close()
        }
        defer { sending.cancel() }
        var unwritten: OutputFailure?
        do throws(CatenaError) {
            for try await message in socket.messages {
                lastHeard.withLock { $0 = .now }
                do throws(OutputFailure) { try Self.write(message) } catch {
                    unwritten = error
                    break
                }
            }
        } catch {
            guard let close = error.underlyingError as? WebSocketClose else { throw error }
            // The reason is escaped for a terminal (WebSocketClose's description).
            StandardError.writeText("error: the server closed the WebSocket with \(close)\n")
            return .webSocketClosed
        }
        // The loop ends as a close begins: the handshake finishes before the process does.
        await socket.close()
        if let unwritten { throw unwritten }
        return .success
    }

    /// A message on its own line: text as it is (escaped for a terminal); binary raw for a
    /// pipe, summed up for a terminal.
    private static func write(_ message: WebSocketMessage) throws(OutputFailure) {
        let terminal = FileHandle.standardOutputIsTerminal
        switch message {
        case .text(let text):
            try StandardOutput.write(Data(((terminal ? TerminalText.escaped(text) : text) + "\n").utf8))
        case .binary(let data) where terminal:
            try StandardOutput.write(Data("[binary message, \(data.count) bytes]\n".utf8))
        case .binary(let data):
            try StandardOutput.write(data + Data("\n".utf8))
        }
    }

    /// Standard input's lines, read on a thread of their own (a blocking read must not
    /// hold one of the concurrency pool's threads).
    private static func standardInputLines() -> AsyncStream<String> {
        let (lines, continuation) = AsyncStream.makeStream(of: String.self, bufferingPolicy: .unbounded)
        let thread = Thread {
            while let line = readLine(strippingNewline: true) { continuation.yield(line) }
            continuation.finish()
        }
        thread.start()
        return lines
    }
}
