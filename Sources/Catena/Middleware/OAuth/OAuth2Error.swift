import Foundation

/// An error an OAuth 2 server answered (RFC 6749 §5.2, RFC 8628 §3.5), or a check of
/// the client's that failed (``Code/stateMismatch``, ``Code/issuerMismatch``).
///
/// ``description`` is the server's text made printable: control and bidirectional
/// characters replaced, cut at 300 characters, and scrubbed of the secrets the request
/// carried, should the server echo them.
public struct OAuth2Error: Error, Sendable, Hashable, CustomStringConvertible {
    /// The `error` code.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        public static let invalidRequest = Code(rawValue: "invalid_request")
        public static let invalidClient = Code(rawValue: "invalid_client")
        /// The code, refresh token or device code is spent, expired or revoked: sign in again.
        public static let invalidGrant = Code(rawValue: "invalid_grant")
        public static let unauthorizedClient = Code(rawValue: "unauthorized_client")
        public static let unsupportedGrantType = Code(rawValue: "unsupported_grant_type")
        public static let invalidScope = Code(rawValue: "invalid_scope")
        /// The user declined.
        public static let accessDenied = Code(rawValue: "access_denied")
        /// The device code expired before the user approved it (also when the client's
        /// own deadline passed).
        public static let expiredToken = Code(rawValue: "expired_token")
        public static let authorizationPending = Code(rawValue: "authorization_pending")
        public static let slowDown = Code(rawValue: "slow_down")
        /// The redirect's `state` is not the one the request sent: it may be forged.
        public static let stateMismatch = Code(rawValue: "state_mismatch")
        /// The server's metadata, or a redirect's `iss`, names another issuer.
        public static let issuerMismatch = Code(rawValue: "issuer_mismatch")
    }

    public var code: Code
    /// The server's `error_description`, printable and scrubbed.
    public var errorDescription: String?

    public init(_ code: Code, description: String? = nil) {
        self.code = code
        self.errorDescription = description.map { ProblemDetails.printable($0, limit: 300) }
    }

    /// The error in an answer's JSON body, if it has one; the secrets `request` carried
    /// (its form's, its Basic pair's) are replaced in its description.
    init?(answer body: Data, secretsOf request: APIRequest) {
        struct Answer: Decodable {
            let error: String
            let error_description: String?
        }
        guard let answer = try? JSONDecoder().decode(Answer.self, from: body), !answer.error.isEmpty else { return nil }
        let redaction = Redaction.effective(for: request)
        let text = answer.error_description.map { redaction.scrub($0, secretsOf: request) }
        self.init(Code(rawValue: ProblemDetails.printable(answer.error, limit: 64)), description: text)
    }

    /// "invalid_grant: the refresh token was revoked".
    public var description: String {
        errorDescription.map { "\(code): \($0)" } ?? code.rawValue
    }
}

extension CatenaError {
    /// The OAuth 2 error underneath, when an OAuth server refused or a check of the
    /// client's failed.
    public var oauth: OAuth2Error? {
        underlyingError as? OAuth2Error ?? (underlyingError as? CatenaError)?.oauth
    }
}
