public import Foundation

// MARK: Device authorization grant

/// What the user must do to approve a device (RFC 8628 §3.2): visit
/// ``verificationURI`` and enter ``userCode``. Show both, then call
/// ``OAuth2Client/token(for:)``. The device code itself is kept out of its description.
public struct OAuth2DeviceAuthorization: Sendable, CustomStringConvertible {
    /// The code the user types, as the server sent it (at most 64 visible characters).
    public let userCode: String
    /// Where the user goes to type it.
    public let verificationURI: URL
    /// The same with the code filled in, if the server offers one (for a QR code).
    public let verificationURIComplete: URL?
    /// When the device code stops working: the server's `expires_in`, at most an hour.
    public let expiresAt: Date
    /// How long to wait between polls: the server's `interval` (5 s when it gives none),
    /// between 1 s and 60 s.
    public let interval: Duration
    let deviceCode: String

    public var description: String { "OAuth2DeviceAuthorization(visit \(verificationURI.absoluteString), enter \(userCode))" }
}

extension OAuth2Client {
    /// Starts the device authorization grant (RFC 8628 §3.1): asks the server for a
    /// device code and the user code to show.
    ///
    /// - Parameters:
    ///   - scopes: the scopes asked for.
    ///   - parameters: further form fields the server wants.
    public func authorizeDevice(scopes: [String] = [], parameters: [(name: String, value: String)] = []) async throws(CatenaError) -> OAuth2DeviceAuthorization
    {
        guard let url = endpoints.deviceAuthorization else {
            throw CatenaError(.invalidRequest, request: APIRequest(url: endpoints.token), detail: "the server has no device authorization endpoint")
        }
        var fields = parameters
        if !scopes.isEmpty { fields.insert(("scope", scopes.joined(separator: " ")), at: 0) }
        let (request, response) = try await post(url, fields)
        struct Answer: Decodable {
            let device_code: String
            let user_code: String
            let verification_uri: String?
            let verification_url: String?  // Google's spelling
            let verification_uri_complete: String?
            let expires_in: Double
            let interval: Double?
        }
        let answer = try response.decode(Answer.self)
        func invalid(_ detail: String) -> CatenaError { CatenaError(.invalidResponse, request: request, response: response, detail: detail) }
        guard TokenAnswer.isTokenText(answer.device_code) else { throw invalid("the device_code is empty, too long or not visible ASCII") }
        guard !answer.user_code.isEmpty, answer.user_code.count <= 64, answer.user_code.unicodeScalars.allSatisfy({ (0x20...0x7E).contains($0.value) })
        else { throw invalid("the user_code is empty, longer than 64 characters or not printable ASCII") }
        func webURL(_ text: String?) -> URL? {
            guard let text, text.utf8.count <= 2048, let url = URL(string: text), ["https", "http"].contains(url.scheme?.lowercased()), url.host != nil
            else { return nil }
            return url
        }
        guard let verification = webURL(answer.verification_uri ?? answer.verification_url) else {
            throw invalid("the verification_uri is missing or not an http(s) URL")
        }
        let lifetime = answer.expires_in.isFinite ? min(max(answer.expires_in, 1), 3600) : 1
        let interval = answer.interval.map { $0.isFinite ? min(max($0, 1), 60) : 5 } ?? 5
        return OAuth2DeviceAuthorization(
            userCode: answer.user_code, verificationURI: verification, verificationURIComplete: webURL(answer.verification_uri_complete),
            expiresAt: clock.now().addingTimeInterval(lifetime), interval: .milliseconds(Int(interval * 1000)), deviceCode: answer.device_code)
    }

    /// Polls the token endpoint until the user approves `device` (RFC 8628 §3.4–3.5):
    /// waits ``OAuth2DeviceAuthorization/interval`` between polls, 5 s longer after each
    /// `slow_down`, and twice as long after a poll that could not connect. Fails with
    /// `access_denied` when the user declines and `expired_token` when the device code
    /// expires (the server's word or the client's own deadline), and with
    /// ``CatenaError/Code/cancelled`` when the calling task is cancelled.
    public func token(for device: OAuth2DeviceAuthorization) async throws(CatenaError) -> BearerToken {
        var interval = device.interval
        let request = APIRequest(.post, url: endpoints.token)
        while true {
            do {
                try await clock.sleep(for: interval)
            } catch {
                throw CatenaError(.cancelled, request: request, detail: "cancelled while waiting for the user to approve the device")
            }
            guard clock.now() < device.expiresAt else {
                throw CatenaError(
                    .authenticationFailed, request: request,
                    underlyingError: OAuth2Error(.expiredToken, description: "the device code expired before it was approved"),
                    detail: "the device code expired before it was approved")
            }
            do {
                return try await requestToken([("grant_type", "urn:ietf:params:oauth:grant-type:device_code"), ("device_code", device.deviceCode)])
            } catch {
                switch error.oauth?.code {
                case .authorizationPending?: continue
                case .slowDown?: interval = min(interval + .seconds(5), .seconds(300))
                default:
                    guard [.cannotConnect, .timedOut, .connectionLost].contains(error.code) else { throw error }
                    interval = min(interval * 2, .seconds(300))
                }
            }
        }
    }

    /// The device flow in one call: ``authorizeDevice(scopes:parameters:)``, `show`
    /// (print the code and where to enter it), then ``token(for:)``.
    ///
    /// - Parameters:
    ///   - scopes: the scopes asked for.
    ///   - show: tells the user where to go and what to type.
    public func signInWithDevice(scopes: [String] = [], show: @Sendable (OAuth2DeviceAuthorization) async -> Void) async throws(CatenaError) -> BearerToken {
        let device = try await authorizeDevice(scopes: scopes)
        await show(device)
        return try await token(for: device)
    }
}
