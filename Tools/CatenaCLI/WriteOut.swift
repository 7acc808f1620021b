import Catena
import Foundation

/// curl's `-w`/`--write-out`: text with `%{variable}`s, printed after the body. Read
/// before anything is sent, so an unknown variable fails at once, naming it.
struct WriteOut {
    /// The variables this command fills in.
    enum Variable: String, CaseIterable {
        case httpCode = "http_code", responseCode = "response_code", timeTotal = "time_total"
        case timeStartTransfer = "time_starttransfer", sizeDownload = "size_download", urlEffective = "url_effective"
        case contentType = "content_type", method, exitCode = "exitcode", errorMessage = "errormsg"
        case timeConnect = "time_connect", timeAppConnect = "time_appconnect", timePreTransfer = "time_pretransfer"
        case remoteIP = "remote_ip", remotePort = "remote_port", localPort = "local_port", httpVersion = "http_version"
        case numConnects = "num_connects"
        case json

        /// Whether the transport must see the connection to know it (AsyncHTTPClient does).
        var isConnection: Bool {
            switch self {
            case .timeConnect, .timeAppConnect, .timePreTransfer, .remoteIP, .remotePort, .localPort, .httpVersion, .numConnects: true
            default: false
            }
        }
    }

    /// curl's variables that Catena does not measure yet: refused by name, not printed as 0.
    /// (DNS is part of AsyncHTTPClient's connection set-up, not apart.)
    static let notMeasured: Set<String> = [
        "time_namelookup", "time_redirect", "local_ip", "ssl_verify_result", "scheme", "size_upload", "size_header", "size_request",
        "speed_download", "speed_upload", "num_redirects",
    ]

    /// Whether the format names a variable only a transport that sees connections fills.
    var needsConnection: Bool {
        pieces.contains { if case .variable(let variable) = $0 { variable.isConnection } else { false } }
    }

    enum Piece: Equatable {
        case text(String)
        case variable(Variable)
    }

    let pieces: [Piece]

    /// Reads `format`: `%{name}`, `%%` for a percent sign, and `\n`, `\r`, `\t`, `\\`.
    /// A format longer than 64 KiB, an unknown or unmeasured variable, or a `%{` without
    /// its `}` is refused with a message that names it.
    init(_ format: String) throws(CommandFailure) {
        guard format.utf8.count <= 65_536 else { throw CommandFailure("-w: the format is longer than 64 KiB") }
        var pieces: [Piece] = []
        var text = ""
        var rest = Substring(format)
        while let first = rest.first {
            rest = rest.dropFirst()
            switch first {
            case "%" where rest.first == "%":
                text.append("%")
                rest = rest.dropFirst()
            case "%" where rest.first == "{":
                guard let close = rest.firstIndex(of: "}") else { throw CommandFailure("-w: a %{ has no closing }") }
                let name = String(rest[rest.index(after: rest.startIndex)..<close])
                rest = rest[rest.index(after: close)...]
                guard let variable = Variable(rawValue: name) else {
                    let shown = TerminalText.escaped(String(name.prefix(40)))
                    if Self.notMeasured.contains(name) {
                        throw CommandFailure("-w: %{\(shown)} is not measured by Catena yet (known: \(Self.known))")
                    }
                    throw CommandFailure("-w: no variable %{\(shown)} (known: \(Self.known))")
                }
                if !text.isEmpty { pieces.append(.text(text)) }
                text = ""
                pieces.append(.variable(variable))
            case "\\" where rest.first.map({ "nrt\\".contains($0) }) == true:
                let escaped = rest.first!
                text.append(escaped == "n" ? "\n" : escaped == "r" ? "\r" : escaped == "t" ? "\t" : "\\")
                rest = rest.dropFirst()
            default:
                text.append(first)
            }
        }
        if !text.isEmpty { pieces.append(.text(text)) }
        self.pieces = pieces
    }

    private static var known: String { Variable.allCases.map(\.rawValue).joined(separator: ", ") }

    /// What one call gave the variables.
    struct Values {
        var status: Int?
        var total: Duration
        var timeToFirstByte: Duration?
        var bodyBytes: Int
        var url: String
        var contentType: String?
        var method: String
        var exitCode: Int32
        var error: String?
        /// The last exchange's connection, and when that exchange began (from the call's start).
        var connection: ConnectionInfo?
        var exchangeStarted: Duration = .zero
        /// New connections the call opened, over its redirects and retries.
        var connects = 0
        /// Whether the transport reports connections: without, `%{json}` leaves their keys out.
        var seesConnections = true
    }

    /// Writes the format, filled in, to standard output (escaped on a terminal).
    func write(_ values: Values) throws(OutputFailure) {
        try StandardOutput.write(Data(render(values, forTerminal: FileHandle.standardOutputIsTerminal).utf8))
    }

    /// The format filled in with `values`; text from the server (the URL, the content
    /// type, an error) is escaped when `forTerminal`.
    func render(_ values: Values, forTerminal: Bool) -> String {
        var output = ""
        for piece in pieces {
            switch piece {
            case .text(let text): output += text
            case .variable(let variable):
                let value = Self.value(of: variable, in: values, forTerminal: forTerminal)
                output += forTerminal && variable != .json ? TerminalText.escaped(value) : value
            }
        }
        return output
    }

    private static func value(of variable: Variable, in values: Values, forTerminal: Bool) -> String {
        func seconds(_ duration: Duration?) -> String {
            guard let duration else { return "0.000000" }
            let (whole, attoseconds) = duration.components
            return String(format: "%.6f", Double(whole) + Double(attoseconds) / 1e18)
        }
        switch variable {
        case .httpCode, .responseCode: return values.status.map { String(format: "%03d", $0) } ?? "000"
        case .timeTotal: return seconds(values.total)
        case .timeStartTransfer: return seconds(values.timeToFirstByte)
        case .sizeDownload: return String(values.bodyBytes)
        case .urlEffective: return values.url
        case .contentType: return values.contentType ?? ""
        case .method: return values.method
        case .exitCode: return String(values.exitCode)
        case .errorMessage: return values.error ?? ""
        // AsyncHTTPClient hands over a connection only once TCP and TLS are both done:
        // both times are its set-up's end (TheCommand documents it). On a reused one, the
        // moment the exchange began, as curl prints about the moment of reuse.
        case .timeConnect, .timeAppConnect:
            guard let connection = values.connection else { return seconds(nil) }
            if variable == .timeAppConnect, connection.tlsVersion == nil { return seconds(nil) }
            return seconds(values.exchangeStarted + (connection.readyAfter ?? .zero))
        case .timePreTransfer:
            guard let connection = values.connection else { return seconds(nil) }
            return seconds(values.exchangeStarted + (connection.readyAfter ?? .zero))
        case .remoteIP: return values.connection?.remoteAddress ?? ""
        case .remotePort: return values.connection?.remotePort.map(String.init) ?? "0"
        case .localPort: return values.connection?.localPort.map(String.init) ?? "0"
        case .httpVersion: return values.connection?.httpVersion ?? "0"
        case .numConnects: return String(values.connects)
        case .json:
            var object: [String: Any] = [:]
            for other in Variable.allCases where other != .json && (values.seesConnections || !other.isConnection) {
                let text = value(of: other, in: values, forTerminal: false)
                switch other {
                case .httpCode, .responseCode, .sizeDownload, .exitCode, .remotePort, .localPort, .numConnects:
                    object[other.rawValue] = Int(text) ?? 0
                case .timeTotal, .timeStartTransfer, .timeConnect, .timeAppConnect, .timePreTransfer: object[other.rawValue] = Double(text) ?? 0
                // Escaped for a terminal first: JSON escapes C0 controls, not C1 or bidi overrides.
                default: object[other.rawValue] = forTerminal ? TerminalText.escaped(text) : text
                }
            }
            // JSONSerialization escapes control characters: the output is safe on a terminal.
            let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
            return String(decoding: data, as: UTF8.self)
        }
    }
}
