public import Foundation

/// An OAuth 2 style bearer token: what a token endpoint answers, and what a
/// ``TokenStorage`` keeps.
///
/// Its `description`, `debugDescription` and mirror (what `print`, `dump`, string
/// interpolation and a debugger show) never contain the access or refresh token, only
/// whether each is there: a token logged by accident is still not a leak.
public struct BearerToken: Sendable, Hashable {
    public var accessToken: String
    public var refreshToken: String?
    /// When the access token stops working, if known.
    public var expiresAt: Date?
    /// The scopes granted, space-separated as the server sent them, if it said.
    public var scope: String?

    public init(accessToken: String, refreshToken: String? = nil, expiresAt: Date? = nil, scope: String? = nil) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.expiresAt = expiresAt
        self.scope = scope
    }
}

extension BearerToken: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// "BearerToken(access token, refresh token, expires 2026-11-27T12:00:00Z, scope read)":
    /// the token values never appear.
    public var description: String {
        var parts = ["access token"]
        if refreshToken != nil { parts.append("refresh token") }
        if let expiresAt { parts.append("expires \(expiresAt.formatted(.iso8601))") }
        if let scope { parts.append("scope \(scope)") }
        return "BearerToken(\(parts.joined(separator: ", ")))"
    }

    public var debugDescription: String { description }

    /// Only the expiry and scope: `dump` and debuggers walk the mirror, not `description`.
    public var customMirror: Mirror {
        Mirror(self, children: ["expiresAt": expiresAt as Any, "scope": scope as Any, "hasRefreshToken": refreshToken != nil], displayStyle: .struct)
    }
}

extension BearerToken: Codable {
    private enum CodingKeys: String, CodingKey {
        case accessToken = "access_token", refreshToken = "refresh_token", expiresAt = "expires_at", scope
    }

    /// The expiry is stored as seconds since 1970, whatever the coder's date strategy.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        accessToken = try container.decode(String.self, forKey: .accessToken)
        refreshToken = try container.decodeIfPresent(String.self, forKey: .refreshToken)
        expiresAt = try container.decodeIfPresent(Double.self, forKey: .expiresAt).map { Date(timeIntervalSince1970: $0) }
        scope = try container.decodeIfPresent(String.self, forKey: .scope)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(accessToken, forKey: .accessToken)
        try container.encodeIfPresent(refreshToken, forKey: .refreshToken)
        try container.encodeIfPresent(expiresAt?.timeIntervalSince1970, forKey: .expiresAt)
        try container.encodeIfPresent(scope, forKey: .scope)
    }
}
