public import HTTPTypes
import Foundation

extension HTTPField.Name {
    /// `Idempotency-Key`: the client's key for one logical call, so that a server applies
    /// a POST or PATCH once however often it arrives (IETF httpapi,
    /// draft-ietf-httpapi-idempotency-key-header).
    public static let idempotencyKey = HTTPField.Name("Idempotency-Key")!
}

/// An `Idempotency-Key` for a request that is not idempotent by its method (POST,
/// PATCH). With one, ``RetryMiddleware`` may send the request again after a lost connection, a
/// timeout, a 5xx or a 429, as it does a GET, and a server that implements the header
/// applies it once: a repeated key gets the first answer again, a key reused with
/// another body a 422, a key still in progress a 409.
///
/// Opt in per request, or in an endpoint's `makeRequest()`:
///
/// ```swift
/// request[option: IdempotencyKey.self] = .generated
/// ```
///
/// The key is made once per call, where the call enters ``RetryMiddleware`` (or the transport,
/// without one), and every attempt and every redirect to the same origin carries it;
/// it is never sent to another origin, nor on a redirect that turns the request into a
/// GET. RetryMiddleware sends the call again only while the hop that failed carried the key (not
/// after a redirect to another origin), and also after a 409, the answer to a key still
/// in progress, once an earlier attempt may have left the server at work (it timed out,
/// lost its connection or got a 5xx; a 409 to the first attempt is a conflict). Only the
/// option opts in: an `Idempotency-Key` field set by hand is sent as it is, and the
/// request is retried as its method says (a server that ignores the header would apply
/// a retried POST twice).
public enum IdempotencyKey: RequestOption, Sendable, Equatable {
    /// No key: POST and PATCH are never retried. The default.
    case none
    /// A new random key (a UUID) for each call.
    case generated
    /// This key, for a call you repeat yourself (across launches, say): printable ASCII.
    case fixed(String)

    public static let defaultValue = IdempotencyKey.none

    /// The methods a key makes retryable.
    public static let keyedMethods: Set<HTTPRequest.Method> = [.post, .patch]

    /// The attempt of a `RetryingOperation` running now: the key its ``generated``
    /// request takes (the same in every attempt), and whether what it sent may be sent
    /// again.
    @TaskLocal package static var attempt: Attempt?

    /// The methods a server may apply twice without harm (RFC 9110, section 9.2.2).
    package static let idempotentMethods: Set<HTTPRequest.Method> = [.get, .head, .options, .trace, .put, .delete]

    /// One attempt of an operation that may be retried, as its requests go out.
    package final class Attempt: Sendable {
        /// The key the attempt's first generated request takes, the same for every attempt.
        package let key: String
        private let state = Locked((generated: 0, unsafe: false))

        package init(key: String) {
            self.key = key
        }

        /// The key for the attempt's next generated request: the shared one for the first.
        /// Another request of the same attempt gets a key of its own, and the attempt may
        /// then not be sent again (the next one could not give it the same key).
        func nextGenerated() -> String {
            let first = state.withLock { state in
                state.generated += 1
                if state.generated > 1 { state.unsafe = true }
                return state.generated == 1
            }
            return first ? key : UUID().uuidString.lowercased()
        }

        /// Notes a request about to go to the server: one that is not idempotent and does
        /// not carry the shared key or a fixed one makes the attempt one not to send again.
        package func noteSending(_ hop: APIRequest) {
            let sent = hop.headerFields[.idempotencyKey]
            let stable =
                switch hop[option: IdempotencyKey.self] {
                case .fixed(let fixed): sent == IdempotencyKey.fieldValue(fixed)
                case .generated: sent == IdempotencyKey.fieldValue(key)
                case .none: false
                }
            if !stable { state.withLock { $0.unsafe = true } }
        }

        /// Whether everything the attempt sent may be sent again: it sent nothing that is
        /// not idempotent, or only with a key the next attempt sends too.
        package var mayResend: Bool { state.withLock { !$0.unsafe } }
    }

    /// `key` as the `Idempotency-Key` field carries it: a structured-field string (RFC
    /// 8941), quoted, with `\` and `"` escaped.
    package static func fieldValue(_ key: String) -> String {
        var quoted = "\""
        for character in key {
            if character == "\\" || character == "\"" { quoted.append("\\") }
            quoted.append(character)
        }
        return quoted + "\""
    }
}

extension APIRequest {
    /// Adds the `Idempotency-Key` field the ``IdempotencyKey`` option asks for, unless
    /// the request carries one already (an earlier attempt's or redirect's, or the
    /// caller's own). Returns whether the option opted the request in.
    ///
    /// - Throws: ``CatenaError/Code/invalidRequest`` for a fixed key that is empty or
    ///   not printable ASCII (it travels as a structured-field string).
    package mutating func applyIdempotencyKey() throws(CatenaError) -> Bool {
        let option = self[option: IdempotencyKey.self]
        if option == .none { return false }
        if headerFields[.idempotencyKey] != nil { return true }
        let key: String
        switch option {
        case .none: return false
        case .generated: key = IdempotencyKey.attempt?.nextGenerated() ?? UUID().uuidString.lowercased()
        case .fixed(let fixed):
            guard !fixed.isEmpty, fixed.utf8.count <= 255, fixed.utf8.allSatisfy({ (0x20...0x7e).contains($0) }) else {
                throw CatenaError(
                    .invalidRequest, request: self,
                    detail: "an Idempotency-Key must be 1 to 255 printable ASCII characters (got \(fixed.utf8.count) bytes)")
            }
            key = fixed
        }
        headerFields[.idempotencyKey] = IdempotencyKey.fieldValue(key)
        return true
    }
}
