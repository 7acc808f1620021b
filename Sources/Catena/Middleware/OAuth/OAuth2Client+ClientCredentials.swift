public import Foundation

// MARK: Client credentials

extension OAuth2Client {
    /// A token for the client itself (RFC 6749 §4.4), for server-to-server calls; the
    /// client should authenticate (`clientSecretBasic` or `clientSecretPost`).
    ///
    /// - Parameters:
    ///   - scopes: the scopes asked for; none leaves the server's default.
    ///   - audience: the API the token is for, as Auth0 and Okta ask (`audience`).
    ///   - resources: the APIs the token is for, as RFC 8707 asks (`resource`, repeated).
    ///   - parameters: further form fields the server wants.
    public func clientCredentials(
        scopes: [String] = [], audience: String? = nil, resources: [URL] = [], parameters: [(name: String, value: String)] = []
    ) async throws(CatenaError) -> BearerToken {
        var fields: [(name: String, value: String)] = [("grant_type", "client_credentials")]
        if !scopes.isEmpty { fields.append(("scope", scopes.joined(separator: " "))) }
        if let audience { fields.append(("audience", audience)) }
        fields += resources.map { ("resource", $0.absoluteString) }
        return try await requestToken(fields + parameters)
    }
}
