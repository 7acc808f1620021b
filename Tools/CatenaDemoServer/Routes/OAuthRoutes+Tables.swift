#if DemoServer
import Catena
import Crypto
import Foundation
import Hummingbird
import NIOCore

/// The authorization server's clients and what it has issued: codes, devices, tokens.
extension OAuthRoutes {
    struct Client: Sendable {
        enum Mode: String, Sendable { case wrongState = "wrong-state", slow, slowDown = "slow-down", expired, denied }

        /// The registered bases: their secret (nil for a public client) and grants.
        static let registered: [String: (secret: String?, grants: Set<String>)] = [
            "catena-cli": (nil, ["authorization_code", OAuthRoutes.deviceGrant, "refresh_token"]),
            "catena-service": ("catena-service-secret", ["client_credentials"]),
        ]

        let id: String, secret: String?, grants: Set<String>, modes: Set<Mode>

        init?(id: String) {
            let words = id.split(separator: ".", omittingEmptySubsequences: false)
            guard let base = Self.registered[String(words[0])] else { return nil }
            self.id = id
            secret = base.secret
            grants = base.grants
            modes = Set(words.dropFirst().compactMap { Mode(rawValue: String($0)) })
        }
    }

    /// What a token stands for. `family` is shared by every token that descends from one
    /// grant, so that a replayed code or refresh token can revoke them all.
    struct Grant: Sendable {
        var subject: String, client: String?, scope: String, family: String
        var audience: String? = nil, resource: String? = nil
    }

    struct Code: Sendable {
        let grant: Grant, redirectURI: String, challenge: String, expires: Date
        var redeemed = false
    }

    struct Device: Sendable {
        let client: String, scope: String, expires: Date
        var polls = 0, spent = false
    }

    struct Refresh: Sendable {
        let grant: Grant
        /// Replaced by a newer one (rotation): presenting it again is a replay.
        var retired = false
    }

    /// Counts for `/oauth/stats`: all clients together, and each client_id by itself.
    struct Stats: Codable, Sendable {
        var password = 0, refresh = 0, invalid = 0, clientCredentials = 0, authorizationCode = 0
        var deviceCode = 0, devicePolls = 0, refreshReuse = 0, revoked = 0
    }

    /// A map whose entries are forgotten at their `keep` date: reads skip them, and once
    /// the table is full an insert drops them, then the ones due soonest, down to 90 %
    /// (so that the sweep runs once per tenth of the table, not on every insert).
    struct Table<Value: Sendable>: Sendable {
        private var entries: [String: (value: Value, keep: Date)] = [:]

        /// Changes or removes an entry; ``insert(_:for:keep:)`` adds one.
        subscript(key: String) -> Value? {
            get { entries[key].flatMap { $0.keep > Date() ? $0.value : nil } }
            set {
                if let newValue { entries[key]?.value = newValue } else { entries[key] = nil }
            }
        }

        mutating func insert(_ value: Value, for key: String, keep: Date) {
            if entries.count >= OAuthRoutes.tableLimit {
                let now = Date()
                entries = entries.filter { $0.value.keep > now }
                let excess = entries.count - OAuthRoutes.tableLimit * 9 / 10
                if excess > 0 {
                    for (old, _) in entries.sorted(by: { $0.value.keep < $1.value.keep }).prefix(excess) { entries[old] = nil }
                }
            }
            entries[key] = (value, keep)
        }

        mutating func removeAll(where shouldRemove: (Value) -> Bool) {
            entries = entries.filter { !shouldRemove($0.value.value) }
        }
    }

    /// Codes and tokens behind one lock: a replay must revoke a family in the same step
    /// that finds the replay, or a token issued meanwhile would outlive the revocation.
    struct Tables: Sendable {
        var codes = Table<Code>()
        var devices = Table<Device>()
        var access = Table<Grant>()
        var refresh = Table<Refresh>()

        mutating func revoke(family: String) {
            access.removeAll { $0.family == family }
            refresh.removeAll { $0.grant.family == family }
        }

        mutating func issue(_ grant: Grant, lifetime: TimeInterval, refreshable: Bool) -> Issued {
            let now = Date()
            let accessToken = OAuthRoutes.randomToken()
            access.insert(grant, for: accessToken, keep: now.addingTimeInterval(lifetime))
            let refreshToken = refreshable ? OAuthRoutes.randomToken() : nil
            if let refreshToken { refresh.insert(Refresh(grant: grant), for: refreshToken, keep: now.addingTimeInterval(24 * 3600)) }
            return Issued(access_token: accessToken, expires_in: Int(lifetime), refresh_token: refreshToken, scope: grant.scope)
        }
    }

    final class State: Sendable {
        let tables = Locked(Tables())
        let counts = Locked<(all: Stats, clients: [String: Stats])>((all: Stats(), clients: [:]))

        /// Counts for all clients and, when there is one, for `client` (at most `tableLimit`
        /// clients: past that an arbitrary one is forgotten).
        func count(_ counter: WritableKeyPath<Stats, Int>, client: String?) {
            counts.withLock { counts in
                counts.all[keyPath: counter] += 1
                guard let client else { return }
                if counts.clients[client] == nil, counts.clients.count >= OAuthRoutes.tableLimit {
                    counts.clients.remove(at: counts.clients.startIndex)
                }
                counts.clients[client, default: Stats()][keyPath: counter] += 1
            }
        }
    }

    /// A token endpoint's success (RFC 6749 §5.1).
    struct Issued: Encodable {
        let access_token: String
        var token_type = "Bearer"
        let expires_in: Int, refresh_token: String?, scope: String
    }
}
#endif  // DemoServer
