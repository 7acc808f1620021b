import Catena
import Foundation
import HTTPTypes

/// How `catena request` ends, like curl's `--fail`: by the outcome of the call.
enum ExitStatus: Int32, CaseIterable {
    /// A final status below 400 (2xx, or a 3xx left unfollowed).
    case success = 0
    /// A failure of the command itself: a cancelled call, an unknown error.
    case failure = 1
    /// Bad input: an option, URL, header, body or file that cannot be used.
    case invalidInput = 2
    /// The server answered 4xx.
    case clientError = 4
    /// The server answered 5xx.
    case serverError = 5
    /// No connection could be made, or it was lost (curl's 7).
    case connection = 7
    /// The server's answer was not usable HTTP (curl's 8).
    case invalidResponse = 8
    /// The call took longer than --timeout (curl's 28).
    case timedOut = 28
    /// The TLS handshake failed for another reason than trust (curl's 35).
    case tlsHandshake = 35
    /// The server closed a WebSocket with a code other than 1000 or 1001.
    case webSocketClosed = 9
    /// The server's certificate was not trusted (curl's 60).
    case untrustedServer = 60
    /// The answer could not be written out: a full disk, a closed pipe (curl's 23).
    case writeFailed = 23

    static func of(status: Int) -> ExitStatus {
        switch status {
        case 400..<500: .clientError
        case 500...: .serverError
        default: .success
        }
    }

    static func of(_ error: CatenaError) -> ExitStatus {
        switch error.code {
        case .timedOut: .timedOut
        case .cannotConnect where error.detail?.hasPrefix(CatenaError.tlsHandshakeFailure) == true: .tlsHandshake
        case .cannotConnect, .connectionLost: .connection
        case .untrustedServer: .untrustedServer
        case .invalidResponse: .invalidResponse
        case .invalidRequest: .invalidInput
        // A refused WebSocket upgrade: its status says how.
        case .unacceptableStatus: error.response.map { of(status: $0.status.code) } ?? .failure
        default: .failure
        }
    }

    /// The table `--help` prints.
    static let help = """
        Exit status: 0 for a final status below 400 (2xx, or a 3xx left unfollowed); 4 for 4xx; 5 for 5xx; \
        7 when no connection could be made or it was lost; 8 for an answer that is not usable HTTP; 23 when the answer \
        could not be written out (a full disk, a closed pipe); 28 when the call \
        timed out; 35 when the TLS handshake failed; 60 when the server's certificate was not trusted; 2 for bad input (an option, header, body or file); \
        1 for anything else.
        """
}

/// Where `catena request` writes the answer. A write can fail (a full disk, a file-size
/// limit, a closed pipe): that is an error naming why, never a trap.
enum StandardOutput {
    static func write(_ data: Data) throws(OutputFailure) {
        do {
            try FileHandle.standardOutput.write(contentsOf: data)
        } catch {
            let posix = ((error as NSError).userInfo[NSUnderlyingErrorKey] as? NSError).flatMap { $0.domain == NSPOSIXErrorDomain ? $0.code : nil }
            throw OutputFailure(
                description: "cannot write the answer to standard output: " + (posix.map { String(cString: strerror(Int32($0))) } ?? "\(error)"))
        }
    }
}

/// Standard output refused the answer.
struct OutputFailure: Error, CustomStringConvertible {
    let description: String
}

/// Where `catena request` writes what it shows besides the body: standard error, so a
/// piped body stays the server's bytes alone.
enum StandardError {
    static func write(_ text: String) {
        // Nowhere to say that standard error is gone (a closed pipe): it is let go, never a trap.
        try? FileHandle.standardError.write(contentsOf: Data(text.utf8))
    }

    /// Writes `text`, which may hold what a server sent, escaped when standard error is
    /// a terminal (see ``TerminalText``).
    static func writeText(_ text: String) {
        write(isTerminal ? TerminalText.escaped(text) : text)
    }

    static var isTerminal: Bool { isatty(2) == 1 }
}

extension FileHandle {
    static var standardOutputIsTerminal: Bool { isatty(1) == 1 }
}

/// A progress display for an upload or a download: a bar redrawn in place on a
/// terminal, a plain line at each quarter otherwise (a log or CI keeps a few lines,
/// not thousands of carriage returns).
final class ProgressDisplay: Sendable {
    private struct State {
        var lastDrawn = ContinuousClock.now - .seconds(1)
        var lastQuarter = -1
        /// A bar is on the terminal's current line, not ended yet.
        var open = false
        /// The transfer completed and its line was ended.
        var ended = false
    }
    private let label: String
    private let onTerminal: Bool
    private let state = Locked(State())

    init(label: String, onTerminal: Bool = StandardError.isTerminal) {
        self.label = label
        self.onTerminal = onTerminal
    }

    func update(_ progress: TransferProgress) {
        let line: String? = state.withLock { state in
            let complete = progress.total.map { progress.completed >= $0 } ?? false
            if onTerminal {
                let now = ContinuousClock.now
                guard !state.ended, complete || now - state.lastDrawn >= .milliseconds(100) else { return nil }
                state.lastDrawn = now
                state.ended = complete
                // A complete transfer ends its line at once: an upload's bar stays on
                // screen above the download's.
                state.open = !complete
                return "\r" + Self.bar(label, progress) + "\u{1B}[K" + (complete ? "\n" : "")
            }
            guard let fraction = progress.fraction else { return nil }
            let quarter = Int(min(max(fraction, 0), 1) * 4)
            guard quarter > state.lastQuarter else { return nil }
            state.lastQuarter = quarter
            return "\(label) \(progress.completed) of \(progress.total ?? 0) bytes (\(quarter * 25) %)\n"
        }
        if let line { StandardError.write(line) }
    }

    /// Ends the bar's line on a terminal when the transfer stopped short of complete.
    func finish() {
        let open = state.withLock { state in
            defer { state.open = false }
            return state.open
        }
        if open { StandardError.write("\n") }
    }

    static func bar(_ label: String, _ progress: TransferProgress) -> String {
        let size = byteCount(progress.completed)
        guard let fraction = progress.fraction, let total = progress.total else { return "\(label) \(size)" }
        let clamped = min(max(fraction, 0), 1)
        let width = 30
        let filled = Int(clamped * Double(width))
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
        return "\(label) [\(bar)] \(Int(clamped * 100)) %  \(size) of \(byteCount(total))"
    }

    static func byteCount(_ bytes: Int64) -> String {
        switch bytes {
        case ..<1024: "\(bytes) B"
        case ..<(1 << 20): String(format: "%.1f KiB", Double(bytes) / 1024)
        case ..<(1 << 30): String(format: "%.1f MiB", Double(bytes) / 1_048_576)
        default: String(format: "%.2f GiB", Double(bytes) / 1_073_741_824)
        }
    }
}

/// JSON laid out for a reader: indented, and coloured when `colours` is on. Each token
/// is kept as the server wrote it (numbers keep their digits, strings their escapes,
/// members their order); only whitespace between tokens changes. Iterative, so deep
/// nesting costs no stack; nil for text that is not JSON Foundation accepts.
enum JSONDisplay {
    static func format(_ data: Data, colours: Bool) -> String? {
        // UTF-8 text only: Foundation also reads JSON behind a byte-order mark and in
        // UTF-16 or UTF-32, whose bytes this layout would not see as tokens.
        guard data.first.map({ "{[\"-0123456789tfn \t\r\n".utf8.contains($0) }) ?? false, !data.contains(0),
            (try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])) != nil
        else { return nil }
        let bytes = Array(data)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        let reset = colours ? Array("\u{1B}[0m".utf8) : []
        func coloured(_ code: String, _ token: ArraySlice<UInt8>) {
            if colours { out += Array("\u{1B}[\(code)m".utf8) }
            // A string may hold C1 or bidi controls as they are; JSON forbids only C0 ones.
            out += Array(TerminalText.escaped(String(decoding: token, as: UTF8.self)).utf8)
            out += reset
        }
        var depth = 0
        func newline() {
            out.append(UInt8(ascii: "\n"))
            out += repeatElement(UInt8(ascii: " "), count: 2 * depth)
        }
        func nextSignificant(after index: Int) -> Int {
            var next = index
            while next < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[next]) { next += 1 }
            return next
        }
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case 0x20, 0x09, 0x0A, 0x0D:
                index += 1
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                let close = byte == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: "]")
                let next = nextSignificant(after: index + 1)
                if next < bytes.count, bytes[next] == close {
                    out += [byte, close]
                    index = next + 1
                } else {
                    out.append(byte)
                    depth += 1
                    newline()
                    index += 1
                }
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth = max(0, depth - 1)
                newline()
                out.append(byte)
                index += 1
            case UInt8(ascii: ","):
                out.append(byte)
                newline()
                index += 1
            case UInt8(ascii: ":"):
                out += Array(": ".utf8)
                index += 1
            case UInt8(ascii: "\""):
                var end = index + 1
                while end < bytes.count, bytes[end] != UInt8(ascii: "\"") {
                    end += bytes[end] == UInt8(ascii: "\\") ? 2 : 1
                }
                end = min(end + 1, bytes.count)
                let next = nextSignificant(after: end)
                let isKey = next < bytes.count && bytes[next] == UInt8(ascii: ":")
                coloured(isKey ? "34;1" : "32", bytes[index..<end])
                index = end
            default:
                var end = index
                while end < bytes.count, !" \t\n\r,:]}".utf8.contains(bytes[end]) { end += 1 }
                let token = bytes[index..<max(end, index + 1)]
                let isNumber = token.first.map { $0 == UInt8(ascii: "-") || (0x30...0x39).contains($0) } ?? false
                coloured(isNumber ? "36" : "33", token)
                index = max(end, index + 1)
            }
        }
        out.append(UInt8(ascii: "\n"))
        return String(decoding: out, as: UTF8.self)
    }
}

/// `-i`: the status line and header fields, secret values redacted.
func headText(status: HTTPResponse.Status, fields: HTTPFields, redaction: Redaction) -> String {
    var text = "HTTP \(status.code) \(status.reasonPhrase)\n"
    for field in fields {
        text += "\(field.name.rawName): \(redaction.printableValue(of: field))\n"
    }
    return text + "\n"
}
