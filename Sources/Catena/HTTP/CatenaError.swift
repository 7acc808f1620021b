public import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The one error every loader throws: what went wrong (``code``), for which request,
/// the response when there was one, and the error underneath.
///
/// Its description names the method and URL and never a credential: secret query
/// values are hidden and header values are never printed.
public struct CatenaError: Error, Sendable {
    /// What kind of failure this is. Extensible: loaders may define their own codes.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The request could not be built or sent as it is: bad URL, bad path
        /// component, a body that failed to encode.
        public static let invalidRequest = Code(rawValue: "invalid request")
        /// No connection to the server: refused, unreachable, unknown host, TLS failure.
        public static let cannotConnect = Code(rawValue: "cannot connect")
        /// The request took longer than its timeout.
        public static let timedOut = Code(rawValue: "timed out")
        /// The calling task was cancelled, or the chain was reset.
        public static let cancelled = Code(rawValue: "cancelled")
        /// The server's answer was not a usable HTTP response (or was too large).
        public static let invalidResponse = Code(rawValue: "invalid response")
        /// The server's TLS certificate was not trusted: its chain does not lead to a
        /// trusted root, it has expired or is not yet valid, it names another host, or
        /// its key matches none of the host's pins (see ``ServerTrust``). Nothing of the
        /// request was sent.
        public static let untrustedServer = Code(rawValue: "untrusted server")
        /// The response's status is not one the caller accepts.
        public static let unacceptableStatus = Code(rawValue: "unacceptable status")
        /// The response body could not be decoded into the expected type.
        public static let decodingFailed = Code(rawValue: "decoding failed")
        /// The chain is being reset and takes no new requests until it is done.
        public static let resetInProgress = Code(rawValue: "reset in progress")
        /// The connection failed after it was made (closed early, protocol error).
        public static let connectionLost = Code(rawValue: "connection lost")
        /// The call would have waited for its origin's rate limit longer than
        /// ``RateLimitMiddleware`` lets it; the detail says when the quota comes back.
        /// Nothing was sent.
        public static let rateLimited = Code(rawValue: "rate limited")
        /// The origin's circuit is open after repeated failures
        /// (``CircuitBreakerMiddleware``); the detail says when it lets a call try
        /// again. Nothing was sent.
        public static let circuitOpen = Code(rawValue: "circuit open")
        /// The call failed and was not retried, because the origin's ``RetryBudget``
        /// was spent; the original error is ``CatenaError/underlyingError``, its
        /// response ``CatenaError/response``.
        public static let retryBudgetExhausted = Code(rawValue: "retry budget exhausted")
        /// Anything else; see ``CatenaError/underlyingError``.
        public static let unknown = Code(rawValue: "unknown")
    }

    /// How the transports begin the detail of a ``Code/cannotConnect`` whose TLS
    /// handshake failed for a reason other than trust (that is ``Code/untrustedServer``).
    package static let tlsHandshakeFailure = "the TLS handshake failed"

    /// What kind of failure this is.
    public var code: Code {
        get { fields.code }
        set { fields = Fields(newValue, fields.request, fields.response, fields.underlyingError, fields.detail) }
    }
    /// The request that failed, as the loader that failed saw it.
    public var request: APIRequest {
        get { fields.request }
        set { fields = Fields(fields.code, newValue, fields.response, fields.underlyingError, fields.detail) }
    }
    /// The response, when the server answered.
    public var response: APIResponse? {
        get { fields.response }
        set { fields = Fields(fields.code, fields.request, newValue, fields.underlyingError, fields.detail) }
    }
    /// The error underneath, from the transport, a decoder or a closure.
    public var underlyingError: (any Error)? {
        get { fields.underlyingError }
        set { fields = Fields(fields.code, fields.request, fields.response, newValue, fields.detail) }
    }
    /// A sentence that says what exactly was wrong (which component, which status).
    public var detail: String? {
        get { fields.detail }
        set { fields = Fields(fields.code, fields.request, fields.response, fields.underlyingError, newValue) }
    }

    /// The error's parts, in one immutable box, so that the error stays one pointer: a
    /// typed throw too large for registers takes room in the frame of every
    /// `throws(CatenaError)` async call (Architecture: "Async frames stay small"). A
    /// change makes a new box.
    private final class Fields: Sendable {
        let code: Code
        let request: APIRequest
        let response: APIResponse?
        let underlyingError: (any Error)?
        let detail: String?

        init(_ code: Code, _ request: APIRequest, _ response: APIResponse?, _ underlyingError: (any Error)?, _ detail: String?) {
            self.code = code
            self.request = request
            self.response = response
            self.underlyingError = underlyingError
            self.detail = detail
        }
    }

    private var fields: Fields

    /// Creates an error. Prefer a `detail` that names the offending part.
    public init(_ code: Code, request: APIRequest, response: APIResponse? = nil, underlyingError: (any Error)? = nil, detail: String? = nil) {
        fields = Fields(code, request, response, underlyingError, detail)
    }

    /// Wraps any error thrown while loading `request`: a CatenaError stays as it is,
    /// task cancellation becomes ``Code/cancelled``, and anything else becomes `code`.
    public static func wrapping(_ error: any Error, request: APIRequest, code: Code = .unknown, detail: String? = nil) -> CatenaError {
        if let error = error as? CatenaError { return error }
        if error is CancellationError { return CatenaError(.cancelled, request: request, underlyingError: error) }
        return CatenaError(code, request: request, underlyingError: error, detail: detail)
    }
}

extension CatenaError: CustomStringConvertible, LocalizedError {
    /// "GET http://host/path: unacceptable status 404 Not Found", with secrets hidden;
    /// with an RFC 9457 problem body, its title follows the status.
    public var description: String {
        // A request that could not be built has no URL to name; the detail names the endpoint.
        let unbuilt = request.host == nil && request.percentEncodedPath.isEmpty && request.percentEncodedQuery == nil
        var text = unbuilt ? "\(code)" : "\(request): \(code)"
        if code == .unacceptableStatus, let response {
            text += " \(response.status.code)"
            if !response.status.reasonPhrase.isEmpty { text += " \(response.status.reasonPhrase)" }
            // The problem's title only: a summary of its type, where `detail` may echo the request.
            if let title = response.problem?.displayed(for: response.request, redaction: .effective(for: response.request)).title, !title.isEmpty {
                text += " (\(title))"
            }
        }
        if let detail { text += ": \(detail)" }
        if let underlyingError, !(underlyingError is CancellationError) {
            let described = Self.describe(underlyingError)
            if detail?.contains(described) != true { text += " (\(described))" }
        }
        return text
    }

    public var errorDescription: String? { description }

    /// A short, secret-free description of an underlying error. URLError's own
    /// description embeds the full URL, so it is reduced to its code here.
    static func describe(_ error: any Error) -> String {
        if let urlError = error as? URLError {
            return "URLError \(urlError.code.rawValue)"
        }
        if let error = error as? CatenaError { return error.description }
        if let error = error as? DecodingError { return describe(decodingError: error) }
        return String(describing: error)
    }

    private static func describe(decodingError error: DecodingError) -> String {
        func path(_ context: DecodingError.Context) -> String {
            let path = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
            return path.isEmpty ? "at the top level" : "at \(path)"
        }
        switch error {
        case .typeMismatch(let type, let context): return "expected \(type) \(path(context)): \(context.debugDescription)"
        case .valueNotFound(let type, let context): return "missing \(type) value \(path(context))"
        case .keyNotFound(let key, let context): return "missing key \"\(key.stringValue)\" \(path(context))"
        case .dataCorrupted(let context): return "\(context.debugDescription) \(path(context))"
        @unknown default: return String(describing: error)
        }
    }
}
