import Foundation

/// A token endpoint's success answer (RFC 6749 §5.1), checked as hostile input.
struct TokenAnswer: Decodable {
    let access_token: String
    let token_type: String?
    let refresh_token: String?
    let expires_in: Double?
    let scope: String?

    private enum CodingKeys: String, CodingKey { case access_token, token_type, refresh_token, expires_in, scope }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        access_token = try container.decode(String.self, forKey: .access_token)
        token_type = try container.decodeIfPresent(String.self, forKey: .token_type)
        refresh_token = try container.decodeIfPresent(String.self, forKey: .refresh_token)
        scope = try container.decodeIfPresent(String.self, forKey: .scope)
        // Some servers send the lifetime as a string.
        if let seconds = try? container.decodeIfPresent(Double.self, forKey: .expires_in) {
            expires_in = seconds
        } else {
            expires_in = (try? container.decodeIfPresent(String.self, forKey: .expires_in)).flatMap { $0.flatMap(Double.init) }
        }
    }

    /// The token in `response`; fails when a value could not be sent back in a header
    /// or is not a bearer token.
    static func token(from response: APIResponse, for request: APIRequest, clock: any RetryClock) throws(CatenaError) -> BearerToken {
        let answer = try response.decode(TokenAnswer.self)
        func invalid(_ detail: String) -> CatenaError { CatenaError(.invalidResponse, request: request, response: response, detail: detail) }
        guard isTokenText(answer.access_token) else { throw invalid("the access_token is empty, longer than 16 KiB or has characters a header cannot carry") }
        if let refresh = answer.refresh_token, !isTokenText(refresh) {
            throw invalid("the refresh_token is empty, longer than 16 KiB or has characters a form cannot carry")
        }
        if let type = answer.token_type, type.lowercased() != "bearer" {
            throw invalid("the token_type is \(ProblemDetails.printable(type, limit: 40)), not Bearer")
        }
        // A year at most; a negative or non-finite lifetime means the token is already spent.
        let lifetime = answer.expires_in.map { $0.isFinite ? min(max($0, 0), 365 * 86_400) : 0 }
        return BearerToken(
            accessToken: answer.access_token, refreshToken: answer.refresh_token,
            expiresAt: lifetime.map { clock.now().addingTimeInterval($0) },
            scope: answer.scope.map { ProblemDetails.printable($0, limit: 1000) })
    }

    /// Visible ASCII only, 1 to 16 KiB: what RFC 6750's b64token and every real token fits.
    static func isTokenText(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 16 * 1024 && text.utf8.allSatisfy { (0x21...0x7E).contains($0) }
    }
}
