#if AsyncHTTPClient
import AsyncHTTPClient
import Catena
import Foundation
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import NIOHTTP2
import NIOHTTPCompression
import NIOPosix
import NIOSOCKS
import NIOSSL

/// AsyncHTTPClient's and SwiftNIO's errors as Catena's codes.
extension AsyncHTTPClientTransport {
    /// Whether `error` says the connection failed or carried no usable response head:
    /// closed, reset, or bytes that do not parse as a response.
    static func isConnectionFailure(_ error: any Error) -> Bool {
        if error is HTTPParserError { return true }
        if let error = error as? IOError { return [ECONNRESET, EPIPE].contains(error.errnoCode) }
        if let error = error as? HTTPClientError { return error == .remoteConnectionClosed }
        if let error = error as? ChannelError { return [.ioOnClosedChannel, .alreadyClosed, .eof, .outputClosed].contains(error) }
        // HTTP/2: a stream the server refused was not processed (RFC 9113, 8.7), and a
        // connection that closed under a new stream never carried it.
        if let error = error as? NIOHTTP2Errors.StreamClosed { return error.errorCode == .refusedStream }
        return error is NIOHTTP2Errors.IOOnClosedConnection
    }

    static func map(_ error: any Error, request: APIRequest, timeout: Duration, limit: Int) -> CatenaError {
        if let error = error as? CatenaError { return error }
        if let wrapped = error as? PreHeadFailure {
            var mapped = map(wrapped.error, request: request, timeout: timeout, limit: limit)
            mapped.underlyingError = wrapped
            return mapped
        }
        if error is CancellationError || Task.isCancelled {
            return CatenaError(.cancelled, request: request, underlyingError: error)
        }
        if error is NIOTooManyBytesError {
            return CatenaError(
                .invalidResponse, request: request, underlyingError: error,
                detail: "the body is larger than the \(limit) bytes allowed (MaximumResponseSize)")
        }
        if let error = error as? NIOHTTPDecompression.DecompressionError {
            let detail =
                error == .limit
                ? "the compressed body inflates to more than \(decompressionRatioLimit) times its size"
                : "the body's compression (Content-Encoding) is corrupt"
            return CatenaError(.invalidResponse, request: request, underlyingError: error, detail: detail)
        }
        if error is NIOHTTPDecompression.ExtraDecompressionError {
            return CatenaError(
                .invalidResponse, request: request, underlyingError: error,
                detail: "the body's compression (Content-Encoding) is corrupt")
        }
        if let error = error as? PublicKeyPinMismatch {
            return CatenaError(.untrustedServer, request: request, underlyingError: error, detail: error.description)
        }
        if let error = error as? CertificateAddressMismatch {
            return CatenaError(.untrustedServer, request: request, underlyingError: error, detail: error.description)
        }
        if let error = error as? SOCKSError.ConnectionFailed {
            return CatenaError(
                .cannotConnect, request: request, underlyingError: error,
                detail: "the SOCKS5 proxy could not connect to the server (reply \(error.reply))")
        }
        if error is SOCKSError.NoValidAuthenticationMethod {
            return CatenaError(
                .cannotConnect, request: request, underlyingError: error,
                detail: "the SOCKS5 proxy asks for a user and password, which AsyncHTTPClient cannot give")
        }
        if String(reflecting: type(of: error)).hasPrefix("NIOSOCKS.SOCKSError.") {
            return CatenaError(.cannotConnect, request: request, underlyingError: error, detail: "the SOCKS5 proxy broke the protocol (\(error))")
        }
        if let error = error as? NIOSSLError {
            // BoringSSL names the check that failed ("CERTIFICATE_VERIFY_FAILED", an
            // unable-to-get-issuer or expired reason); the host name check is NIOSSL's own.
            let text = String(describing: error)
            if let reason = Self.handshakeAlert(text) {
                return CatenaError(.cannotConnect, request: request, underlyingError: error, detail: "\(CatenaError.tlsHandshakeFailure) (\(reason))")
            }
            switch error {
            case .unableToValidateCertificate:
                return CatenaError(
                    .untrustedServer, request: request, underlyingError: error,
                    detail: "the server's certificate does not name \(request.host ?? "the host")")
            case .handshakeFailed where text.contains("CERTIFICATE_VERIFY_FAILED") || text.contains("certificate"):
                return CatenaError(
                    .untrustedServer, request: request, underlyingError: error,
                    detail: "the server's certificate failed validation (\(text.prefix(300)))")
            default:
                return CatenaError(.cannotConnect, request: request, underlyingError: error, detail: "\(CatenaError.tlsHandshakeFailure) (\(text.prefix(300)))")
            }
        }
        if let error = error as? BoringSSLError, let reason = Self.handshakeAlert(String(describing: error)) {
            return CatenaError(.cannotConnect, request: request, underlyingError: error, detail: "\(CatenaError.tlsHandshakeFailure) (\(reason))")
        }
        if let error = error as? NIOSSLExtraError, error == .failedToValidateHostname {
            return CatenaError(
                .untrustedServer, request: request, underlyingError: error,
                detail: "the server's certificate does not name \(request.host ?? "the host")")
        }
        if let error = error as? NIOConnectionError {
            let refused = error.connectionErrors.contains { ($0.error as? IOError)?.errnoCode == ECONNREFUSED }
            let dns = error.dnsAError != nil || error.dnsAAAAError != nil
            return CatenaError(
                .cannotConnect, request: request, underlyingError: error,
                detail: refused ? "connection refused" : dns ? "unknown host" : nil)
        }
        if let error = error as? IOError {
            switch error.errnoCode {
            case ECONNREFUSED:
                return CatenaError(.cannotConnect, request: request, underlyingError: error, detail: "connection refused")
            case ENOENT where request[option: UnixSocket.self] != nil:
                return CatenaError(.cannotConnect, request: request, underlyingError: error, detail: "no Unix socket at that path")
            case ECONNRESET, EPIPE:
                return CatenaError(.connectionLost, request: request, underlyingError: error, detail: "the connection was reset")
            default:
                return CatenaError(.connectionLost, request: request, underlyingError: error)
            }
        }
        if let error = error as? ChannelError {
            if case .connectTimeout = error {
                return CatenaError(.cannotConnect, request: request, underlyingError: error, detail: "connect timed out")
            }
            if [.ioOnClosedChannel, .alreadyClosed, .eof, .outputClosed].contains(error) {
                return CatenaError(.connectionLost, request: request, underlyingError: error, detail: "the connection closed")
            }
        }
        if let error = error as? NIOHTTP2Errors.StreamClosed {
            return CatenaError(
                .connectionLost, request: request, underlyingError: error,
                detail: "the server reset the HTTP/2 stream (\(error.errorCode))")
        }
        if error is NIOHTTP2Errors.IOOnClosedConnection {
            return CatenaError(.connectionLost, request: request, underlyingError: error, detail: "the HTTP/2 connection closed")
        }
        if error is any NIOHTTP2Error {
            return CatenaError(
                .invalidResponse, request: request, underlyingError: error,
                detail: "the server broke the HTTP/2 protocol (\(String(describing: error).prefix(200)))")
        }
        if let error = error as? HTTPParserError {
            if error == .invalidEOFState {
                return CatenaError(
                    .connectionLost, request: request, underlyingError: error,
                    detail: "the connection closed before the response was complete")
            }
            return CatenaError(
                .invalidResponse, request: request, underlyingError: error,
                detail: "the response's framing is broken (\(error))")
        }
        guard let clientError = error as? HTTPClientError else { return CatenaError.wrapping(error, request: request) }
        let code: CatenaError.Code
        var detail: String?
        switch clientError {
        case .cancelled:
            code = .cancelled
        case .deadlineExceeded, .readTimeout, .writeTimeout:
            code = .timedOut
            detail = "no complete answer within \(timeout)"
        case .getConnectionFromPoolTimeout:
            code = .timedOut
            detail =
                "no connection to the host became free within the client's connection timeout: the pooled ones were busy, "
                + "or a new one was still connecting (the request was not sent; for many requests at once, raise "
                + "HTTPClient.Configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit)"
        case .connectTimeout:
            code = .cannotConnect
            detail = "connect timed out"
        case .proxyAuthenticationRequired:
            code = .cannotConnect
            detail = "the proxy asks for credentials (407): none were given, or it refused them"
        case .invalidProxyResponse:
            code = .cannotConnect
            detail =
                "the proxy refused to open a tunnel to the server (its answer to CONNECT was not 200): "
                + "wrong proxy credentials, or a host or port it does not allow"
        case .httpProxyHandshakeTimeout, .socksHandshakeTimeout:
            code = .cannotConnect
            detail = "the proxy did not answer in time"
        case .remoteConnectionClosed:
            code = .connectionLost
            detail = "the connection closed before the response was complete"
        case .invalidURL, .emptyHost, .emptyScheme, .missingSocketPath:
            code = .invalidRequest
        case .alreadyShutdown:
            code = .invalidRequest
            detail = "the transport's HTTPClient was shut down before this request"
        case .redirectLimitReached, .redirectCycleDetected, .bodyLengthMismatch, .identityCodingIncorrectlyPresent:
            code = .invalidResponse
            detail = "the response's framing is broken (\(clientError))"
        default:
            code = .unknown
        }
        return CatenaError(code, request: request, underlyingError: clientError, detail: detail)
    }

    /// The server's verdict on the client's certificate (mutual TLS) in a handshake
    /// alert, as BoringSSL names it; nil for any other error.
    static func handshakeAlert(_ text: String) -> String? {
        if text.contains("ALERT_CERTIFICATE_REQUIRED") {
            return "the server requires a client certificate (mutual TLS): give the transport a ClientIdentity"
        }
        let refusals = ["ALERT_UNKNOWN_CA", "ALERT_BAD_CERTIFICATE", "ALERT_CERTIFICATE_UNKNOWN", "ALERT_UNSUPPORTED_CERTIFICATE"]
        return refusals.contains(where: text.contains) ? "the server refused the client certificate" : nil
    }
}

#endif  // AsyncHTTPClient
