public import Foundation

/// One WebSocket message: text (valid UTF-8, checked) or binary.
public enum WebSocketMessage: Sendable, Hashable {
    /// A text message.
    case text(String)
    /// A binary message.
    case binary(Data)

    /// The message's payload size in bytes.
    public var byteCount: Int {
        switch self {
        case .text(let text): text.utf8.count
        case .binary(let data): data.count
        }
    }
}

/// A WebSocket close code (RFC 6455, section 7.4).
public struct WebSocketCloseCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// 1000: the purpose of the connection was fulfilled.
    public static let normalClosure = Self(rawValue: 1000)
    /// 1001: the endpoint is going away (a server shutting down, a client leaving).
    public static let goingAway = Self(rawValue: 1001)
    /// 1002: the endpoint broke the protocol.
    public static let protocolError = Self(rawValue: 1002)
    /// 1003: a kind of data the endpoint does not accept.
    public static let unsupportedData = Self(rawValue: 1003)
    /// 1005: the close frame carried no code (never sent).
    public static let noStatusReceived = Self(rawValue: 1005)
    /// 1006: the connection ended without a close frame (never sent).
    public static let abnormalClosure = Self(rawValue: 1006)
    /// 1007: a text message was not UTF-8, or data did not match its type.
    public static let invalidPayload = Self(rawValue: 1007)
    /// 1008: a message broke the endpoint's policy.
    public static let policyViolation = Self(rawValue: 1008)
    /// 1009: a message was too big to handle.
    public static let messageTooBig = Self(rawValue: 1009)
    /// 1010: the server did not agree to an extension the client needs.
    public static let mandatoryExtension = Self(rawValue: 1010)
    /// 1011: the server met an unexpected condition.
    public static let internalError = Self(rawValue: 1011)

    /// Whether the code may appear in a close frame: 1000–1003, 1007–1014 and the
    /// registered and private ranges 3000–4999 (RFC 6455, section 7.4.2).
    public var mayBeSent: Bool {
        switch rawValue {
        case 1000...1003, 1007...1014, 3000...4999: true
        default: false
        }
    }

    public var description: String {
        let name: String? =
            switch rawValue {
            case 1000: "normal closure"
            case 1001: "going away"
            case 1002: "protocol error"
            case 1003: "unsupported data"
            case 1005: "no status received"
            case 1006: "abnormal closure"
            case 1007: "invalid payload"
            case 1008: "policy violation"
            case 1009: "message too big"
            case 1010: "mandatory extension"
            case 1011: "internal error"
            default: nil
            }
        return name.map { "\(rawValue) (\($0))" } ?? String(rawValue)
    }
}

/// How a WebSocket ended: the code and reason of the close frame the server sent (or
/// that Catena sent when it failed the connection).
public struct WebSocketClose: Error, Sendable, Hashable, CustomStringConvertible {
    /// The code; ``WebSocketCloseCode/noStatusReceived`` when the frame carried none,
    /// ``WebSocketCloseCode/abnormalClosure`` when there was no close frame.
    public var code: WebSocketCloseCode
    /// The reason given with the code, made printable (at most 123 bytes on the wire).
    public var reason: String

    /// A close from its parts.
    public init(code: WebSocketCloseCode, reason: String = "") {
        self.code = code
        self.reason = reason
    }

    /// Whether the close was an orderly end: 1000, 1001, or a close frame without a code.
    public var isNormal: Bool {
        code == .normalClosure || code == .goingAway || code == .noStatusReceived
    }

    public var description: String {
        reason.isEmpty ? "\(code)" : "\(code): \(Self.printable(reason))"
    }

    /// The reason as a terminal may show it: control characters escaped.
    static func printable(_ text: String) -> String {
        var shown = ""
        for scalar in text.unicodeScalars {
            if scalar.properties.generalCategory == .control || scalar.properties.generalCategory == .format {
                shown += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                shown.unicodeScalars.append(scalar)
            }
        }
        return shown
    }
}
