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

    /// The key a ``generated`` request takes instead of a new one while this is bound:
    /// `RetryingOperation` binds one per operation, so each of its attempts carries the
    /// same key and the server applies the call once.
    @TaskLocal package static var sharedKey: String?

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
        case .generated: key = IdempotencyKey.sharedKey ?? UUID().uuidString.lowercased()
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
