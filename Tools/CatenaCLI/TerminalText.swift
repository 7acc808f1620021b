import Foundation
import Logging

/// What the command writes to a terminal from a server: escaped where a terminal would
/// obey it. A hostile server's `ESC ] 52` would write the clipboard, `ESC ] 0` the
/// window title, OSC 8 hide a link; C1 controls act like escapes on many terminals, and
/// bidi overrides (U+202E) reorder what is shown. Pipes and files get the raw bytes.
enum TerminalText {
    /// `text` with every control character but line feed and tab, DEL, the C1 controls
    /// and the bidi controls written as `\u{…}`.
    static func escaped(_ text: some StringProtocol) -> String {
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if isUnsafe(scalar) {
                out.append(contentsOf: "\\u{\(String(scalar.value, radix: 16))}".unicodeScalars)
            } else {
                out.append(scalar)
            }
        }
        return String(out)
    }

    static func isUnsafe(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x0A, 0x09: false
        case 0x00..<0x20, 0x7F, 0x80...0x9F: true
        // Bidi marks, embeddings, overrides and isolates.
        case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }

    /// Whether `data` is a body a terminal should not be given: a NUL byte, or bytes
    /// that are not UTF-8 (curl's test is the NUL byte alone).
    static func isBinary(_ data: Data) -> Bool {
        data.contains(0) || String(data: data, encoding: .utf8) == nil
    }

    /// What curl says when it refuses a binary body on a terminal.
    static let binaryWarning = """
        Warning: Binary output can mess up your terminal. Use "--output -" to tell catena to output it to your \
        terminal anyway, or consider "--output <FILE>" to save to a file.

        """
}

/// `--verbose`'s log on standard error, laid out as swift-log's `StreamLogHandler`
/// lays it out, escaped when standard error is a terminal: the log holds header values
/// and URLs a server sent.
struct StandardErrorLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let all = metadata.merging(event.metadata ?? [:]) { $1 }
        let shown = all.isEmpty ? "" : " " + all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        let time = Date().formatted(.iso8601)
        StandardError.writeText("\(time) \(event.level) \(label) :\(shown) \(event.message)\n")
    }
}
