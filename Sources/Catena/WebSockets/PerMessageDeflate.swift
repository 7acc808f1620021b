package import Foundation

/// permessage-deflate (RFC 7692): messages compressed with DEFLATE, offered when
/// ``WebSocketOptions/compression`` is set and used when the server agrees.
///
/// Off by default. Compression costs CPU on both sides, and a compressed stream that
/// mixes a secret with text an attacker chooses can leak the secret through message
/// sizes (the CRIME attack on TLS compression): turn it on for large, repetitive
/// messages that carry no such mix.
///
/// ```swift
/// var options = WebSocketOptions()
/// options.compression = .deflate
/// ```
public struct WebSocketCompression: Sendable, Hashable {
    /// Asks the server to compress each of its messages on its own
    /// (`server_no_context_takeover`): the socket then keeps no window between them, at
    /// some cost in ratio. A server that accepts permessage-deflate must agree.
    public var serverNoContextTakeover: Bool
    /// Compresses each message Catena sends on its own (`client_no_context_takeover`).
    public var clientNoContextTakeover: Bool

    /// - Parameters:
    ///   - serverNoContextTakeover: see ``serverNoContextTakeover``.
    ///   - clientNoContextTakeover: see ``clientNoContextTakeover``.
    public init(serverNoContextTakeover: Bool = false, clientNoContextTakeover: Bool = false) {
        self.serverNoContextTakeover = serverNoContextTakeover
        self.clientNoContextTakeover = clientNoContextTakeover
    }

    /// permessage-deflate with each side keeping its window between messages.
    public static let deflate = WebSocketCompression()
}

/// What the server agreed to in its `Sec-WebSocket-Extensions` (RFC 7692 section 7.1).
package struct PerMessageDeflate: Sendable, Equatable {
    /// Whether the server compresses each message on its own.
    package var serverNoContextTakeover = false
    /// Whether Catena must compress each message on its own.
    package var clientNoContextTakeover = false
    /// The server's window, 8 to 15 bits.
    package var serverMaxWindowBits = 15
    /// The largest window Catena may compress with, 8 to 15 bits.
    package var clientMaxWindowBits = 15

    package init() {}

    /// The offer for `compression`: the client's window is left to the server.
    static func offer(_ compression: WebSocketCompression) -> String {
        var offer = "permessage-deflate; client_max_window_bits"
        if compression.serverNoContextTakeover { offer += "; server_no_context_takeover" }
        if compression.clientNoContextTakeover { offer += "; client_no_context_takeover" }
        return offer
    }

    /// The parameters of the server's answer `field` to the offer for `offered`, or why
    /// it fails the connection (RFC 7692 section 5: an answer that does not fit the offer).
    static func agreed(_ field: String, offered: WebSocketCompression) -> Result<PerMessageDeflate, Refusal> {
        let extensions = field.split(separator: ",", omittingEmptySubsequences: false)
        guard extensions.count == 1 else { return .failure(Refusal("the server answered with \(extensions.count) WebSocket extensions, and one was offered")) }
        var parts = extensions[0].split(separator: ";", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        let name = parts.removeFirst()
        guard name.lowercased() == "permessage-deflate" else {
            return .failure(
                Refusal("the server answered with the WebSocket extension \"\(WebSocketClose.printable(String(name.prefix(40))))\", which was not offered"))
        }
        var agreed = PerMessageDeflate()
        var seen: Set<String> = []
        for part in parts {
            let pair = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            let key = pair[0].lowercased()
            var value = pair.count == 2 ? pair[1] : nil
            if let quoted = value, quoted.count >= 2, quoted.hasPrefix("\""), quoted.hasSuffix("\"") { value = String(quoted.dropFirst().dropLast()) }
            guard seen.insert(key).inserted else {
                return .failure(Refusal("permessage-deflate's answer names \(WebSocketClose.printable(String(key.prefix(40)))) twice"))
            }
            switch key {
            case "server_no_context_takeover" where value == nil: agreed.serverNoContextTakeover = true
            case "client_no_context_takeover" where value == nil: agreed.clientNoContextTakeover = true
            case "server_max_window_bits":
                guard let bits = value.flatMap(windowBits) else { return .failure(Refusal("permessage-deflate's server_max_window_bits must be 8 to 15")) }
                agreed.serverMaxWindowBits = bits
            case "client_max_window_bits":
                guard let bits = value.flatMap(windowBits) else { return .failure(Refusal("permessage-deflate's client_max_window_bits must be 8 to 15")) }
                agreed.clientMaxWindowBits = bits
            default:
                return .failure(Refusal("permessage-deflate's answer holds \"\(WebSocketClose.printable(String(part.prefix(40))))\", which it may not"))
            }
        }
        // Section 7.1.1.1: a server that cannot keep from taking over its context declines the offer.
        if offered.serverNoContextTakeover, !agreed.serverNoContextTakeover {
            return .failure(Refusal("the server accepted permessage-deflate without server_no_context_takeover, which was asked"))
        }
        agreed.clientNoContextTakeover = agreed.clientNoContextTakeover || offered.clientNoContextTakeover
        return .success(agreed)
    }

    /// 8 to 15, written as the RFC's grammar says: digits, no leading zero.
    private static func windowBits(_ text: String) -> Int? {
        guard (1...2).contains(text.utf8.count), text.utf8.allSatisfy({ (0x30...0x39).contains($0) }), !text.hasPrefix("0"), let bits = Int(text),
            (8...15).contains(bits)
        else { return nil }
        return bits
    }

    struct Refusal: Error {
        let detail: String
        init(_ detail: String) { self.detail = detail }
    }
}

/// The compressor and decompressor of one socket, made by its transport for what the
/// server agreed to. `inflate` is called by the socket's reading task only, `deflate` by
/// any sender: each keeps its window between messages unless the agreement says otherwise.
package protocol WebSocketMessageCodec: Sendable {
    /// One message's compressed payload inflated (the codec adds the 0x00 0x00 0xFF
    /// 0xFF that RFC 7692 section 7.2.2 strips), at most `limit` bytes.
    func inflate(_ payload: Data, limit: Int) throws(WebSocketInflateError) -> Data
    /// One message deflated, its trailing 0x00 0x00 0xFF 0xFF stripped, handed to
    /// `send` while no other message is deflated: messages go out in the order their
    /// compression saw them, which a kept window needs.
    func deflate<Sent>(_ message: Data, then send: (Data) -> Sent) -> Sent
}

/// Why a compressed message could not be inflated.
package enum WebSocketInflateError: Error, Equatable {
    /// It inflates to more than the limit.
    case tooBig
    /// It is no DEFLATE data: what zlib said.
    case corrupt(String)
}
