public import Foundation
import HTTPTypes

/// The cookies a ``CookieMiddleware`` middleware keeps: per origin, as RFC 6265 says, in memory.
///
/// Thread-safe; share one between chains that should share a session. Bounded: at most
/// ``perDomainLimit`` cookies per domain and ``totalLimit`` in all (the oldest go first),
/// each name and value together at most 4,096 bytes, Max-Age at most 400 days.
public final class CookieJar: Sendable {
    /// The most cookies kept for one domain.
    public static let perDomainLimit = 50
    /// The most cookies kept in all.
    public static let totalLimit = 1000

    private let cookies = Locked<[Cookie]>([])
    private let now: @Sendable () -> Date

    /// An empty jar; `now` is the clock expiry is judged by (tests pass their own).
    public init(now: @escaping @Sendable () -> Date = Date.init) {
        self.now = now
    }

    /// The cookies kept and not expired, oldest first.
    public var all: [Cookie] {
        let now = now()
        return cookies.withLock { $0 }.filter { cookie in cookie.expires.map { $0 > now } ?? true }
    }

    /// The value of the `Cookie` field for `request`, or nil when no cookie goes with it:
    /// those whose domain and path match, Secure ones over HTTPS only, longest path first.
    public func cookieField(for request: APIRequest) -> String? {
        guard let host = request.host.map(Cookie.canonicalHost) else { return nil }
        let secure = request.scheme?.lowercased() == "https"
        let path = request.percentEncodedPath.isEmpty ? "/" : request.percentEncodedPath
        let now = now()
        // Longest path first, then oldest; ties keep the order they were stored in.
        let matching = cookies.withLock { $0 }.enumerated().filter { $0.element.matches(host: host, secure: secure, path: path, at: now) }
            .sorted { first, second in
                let (a, b) = (first.element, second.element)
                if a.path.count != b.path.count { return a.path.count > b.path.count }
                return a.created != b.created ? a.created < b.created : first.offset < second.offset
            }
        guard !matching.isEmpty else { return nil }
        return matching.map { "\($0.element.name)=\($0.element.value)" }.joined(separator: "; ")
    }

    /// Keeps the cookies `response` sets, as the answer to `request`. Set-Cookie fields
    /// that RFC 6265bis says to ignore are ignored: a Domain the request's host is not in,
    /// a public suffix as Domain, a Secure cookie from plain HTTP, one from plain HTTP
    /// that would overwrite or delete a Secure cookie of the same name, a `__Secure-`
    /// cookie without Secure, a `__Host-` one without Secure, with a Domain or with a
    /// path other than "/", one too large.
    public func store(_ response: APIResponse) {
        store(response.headerFields, for: response.request)
    }

    func store(_ fields: HTTPFields, for request: APIRequest) {
        guard let host = request.host.map(Cookie.canonicalHost) else { return }
        let secure = request.scheme?.lowercased() == "https"
        let now = now()
        let parsed = fields[values: .setCookie].compactMap(SetCookie.init)
        guard !parsed.isEmpty else { return }
        let requestPath = request.percentEncodedPath
        cookies.withLock { cookies in
            for set in parsed {
                guard let cookie = Self.cookie(set, host: host, secure: secure, requestPath: requestPath, now: now) else { continue }
                // RFC 6265bis, section 5.7: plain HTTP neither overwrites nor deletes a
                // Secure cookie of the same name whose domain and path cover it.
                if !secure,
                    cookies.contains(where: {
                        $0.secure && $0.name == cookie.name
                            && (Cookie.domainMatches($0.domain, cookie.domain) || Cookie.domainMatches(cookie.domain, $0.domain))
                            && Cookie.pathMatches(cookie.path, $0.path)
                    })
                {
                    continue
                }
                let existing = cookies.firstIndex {
                    $0.name == cookie.name && $0.domain == cookie.domain && $0.hostOnly == cookie.hostOnly && $0.path == cookie.path
                }
                var kept = cookie
                if let existing {
                    kept.created = cookies[existing].created
                    cookies.remove(at: existing)
                }
                if let expires = kept.expires, expires <= now { continue }  // an expiry in the past deletes
                cookies.append(kept)
                Self.evict(&cookies, domain: kept.domain, now: now)
            }
        }
    }

    /// Forgets every cookie.
    public func removeAll() {
        cookies.withLock { $0.removeAll() }
    }

    private static func cookie(_ set: SetCookie, host: String, secure: Bool, requestPath: String, now: Date) -> Cookie? {
        if set.secure && !secure { return nil }  // RFC 6265bis: only a secure origin sets a Secure cookie
        // RFC 6265bis, section 4.1.3: `__Secure-` needs Secure (so a secure origin);
        // `__Host-` also no Domain and the path "/" (the prefixes compared without case).
        let lowercasedName = set.name.lowercased()
        if lowercasedName.hasPrefix("__secure-"), !set.secure { return nil }
        if lowercasedName.hasPrefix("__host-"), !set.secure || set.domain != nil || set.path != "/" { return nil }
        var domain = host, hostOnly = true
        if let attribute = set.domain {
            if PublicSuffixes.contains(attribute) {
                guard attribute == host else { return nil }
            } else {
                guard Cookie.domainMatches(host, attribute) else { return nil }
                domain = attribute
                hostOnly = false
            }
        }
        let expires: Date? =
            if let maxAge = set.maxAge {
                maxAge <= 0 ? .distantPast : now.addingTimeInterval(TimeInterval(maxAge))
            } else {
                set.expires
            }
        return Cookie(
            name: set.name, value: set.value, domain: domain, hostOnly: hostOnly,
            path: set.path ?? Cookie.defaultPath(requestPath), secure: set.secure, httpOnly: set.httpOnly,
            expires: expires, created: now)
    }

    /// Drops expired cookies, then the oldest of `domain` past its limit, then the oldest past the total.
    private static func evict(_ cookies: inout [Cookie], domain: String, now: Date) {
        guard cookies.count > 1 else { return }
        cookies.removeAll { cookie in cookie.expires.map { $0 <= now } ?? false }
        var ofDomain = cookies.indices.filter { cookies[$0].domain == domain }
        while ofDomain.count > CookieJar.perDomainLimit, let oldest = ofDomain.min(by: { cookies[$0].created < cookies[$1].created }) {
            cookies.remove(at: oldest)
            ofDomain = cookies.indices.filter { cookies[$0].domain == domain }
        }
        while cookies.count > CookieJar.totalLimit, let oldest = cookies.indices.min(by: { cookies[$0].created < cookies[$1].created }) {
            cookies.remove(at: oldest)
        }
    }
}
