import Foundation
import HTTPTypes

/// A stored response.
struct CacheEntry: Sendable {
    let status: HTTPResponse.Status
    let headerFields: HTTPFields
    let body: Data
    let receivedAt: Date
    /// Request header values named by the response's `Vary`.
    let varying: [HTTPField.Name: String]
    /// Set when `varying` holds the values sealed with this secret, not in clear (an
    /// entry from disk: a `Vary: Authorization` must not put the token in a file).
    let varyingSecret: [UInt8]?
    let directives: CacheControl
    /// How long the response stays fresh, in seconds.
    let lifetime: TimeInterval
    /// How old it was when it arrived (RFC 9111, 4.2.3): its `Age`, or, when more, how
    /// far its `Date` lay behind the system clock on arrival. Measured then, on the clock
    /// the server's `Date` shares, not the cache's `now` (which tests move), and kept.
    let initialAge: TimeInterval

    /// Statuses stored; all of them heuristically cacheable too (RFC 9110, 15.1).
    static let cacheableStatuses: Set<Int> = [200, 203, 204, 300, 301, 308, 404, 410]

    /// The entry for `response`, or nil when HTTP says it may not be stored.
    init?(response: APIResponse, request: APIRequest, receivedAt: Date) {
        let directives = CacheControl(response.headerFields[.cacheControl])
        guard Self.cacheableStatuses.contains(response.status.code), !directives.noStore,
            !CacheControl(request.headerFields[.cacheControl]).noStore
        else { return nil }
        if request.carriesCredentials, !directives.isPublic { return nil }
        guard let names = Self.varyNames(response.headerFields) else { return nil }
        var varying: [HTTPField.Name: String] = [:]
        for field in names { varying[field] = Self.normalised(request.headerFields[field], of: field) }
        self.status = response.status
        self.headerFields = response.headerFields
        self.body = response.body
        self.receivedAt = receivedAt
        self.varying = varying
        self.varyingSecret = nil
        self.directives = directives
        self.lifetime = Self.lifetime(of: response.headerFields, directives: directives, receivedAt: receivedAt)
        self.initialAge = Self.initialAge(of: response.headerFields, arrivedAt: Date())
        guard lifetime > 0 || hasValidator else { return nil }
    }

    /// An entry of these parts, its directives and lifetime worked out from `headerFields`.
    init(
        status: HTTPResponse.Status, headerFields: HTTPFields, body: Data, receivedAt: Date, varying: [HTTPField.Name: String],
        varyingSecret: [UInt8]? = nil, initialAge: TimeInterval? = nil
    ) {
        self.status = status
        self.headerFields = headerFields
        self.body = body
        self.receivedAt = receivedAt
        self.varying = varying
        self.varyingSecret = varyingSecret
        directives = CacheControl(headerFields[.cacheControl])
        lifetime = Self.lifetime(of: headerFields, directives: directives, receivedAt: receivedAt)
        self.initialAge = initialAge ?? Self.initialAge(of: headerFields, arrivedAt: Date())
    }

    /// The body and header fields, roughly, in bytes.
    var cost: Int { body.count + headerFields.reduce(0) { $0 + $1.name.rawName.utf8.count + $1.value.utf8.count + 4 } }

    var hasValidator: Bool { headerFields[.eTag] != nil || headerFields[.lastModified] != nil }

    /// How long the response stays fresh, in seconds: `max-age`, else `Expires` - `Date`,
    /// else the heuristic of RFC 9111, 4.2.2. Worked out once per stored response (dates
    /// are costly to parse), not per lookup.
    static func lifetime(of fields: HTTPFields, directives: CacheControl, receivedAt: Date) -> TimeInterval {
        if let maxAge = directives.maxAge { return TimeInterval(maxAge) }
        let date = fields[.date].flatMap(HTTPDate.parse) ?? receivedAt
        if let expires = fields[.expires] {
            guard let expiry = HTTPDate.parse(expires) else { return 0 }  // an invalid Expires means "already expired"
            return max(0, expiry.timeIntervalSince(date))
        }
        // No explicit lifetime: a tenth of how long it had not changed when sent (4.2.2;
        // every status stored here is heuristically cacheable), at most a day, so that
        // an old file is not kept for months.
        guard let modified = fields[.lastModified].flatMap(HTTPDate.parse) else { return 0 }
        let unchanged = date.timeIntervalSince(modified)
        return unchanged.isFinite ? min(max(0, unchanged / 10), Self.heuristicCeiling) : 0
    }

    /// The longest a heuristic lifetime runs: a day.
    static let heuristicCeiling: TimeInterval = 86_400

    /// The corrected initial age (RFC 9111, 4.2.3), less the response delay, which a
    /// client on the same network as its answer's arrival leaves out.
    static func initialAge(of fields: HTTPFields, arrivedAt: Date) -> TimeInterval {
        // Age is delta-seconds: "1e19", "inf", "-5" or "nan" count as 0, huge as 2^31.
        let stated = fields[.age].map { TimeInterval(CacheControl.deltaSeconds($0.trimmingCharacters(in: .whitespaces))) } ?? 0
        let apparent = fields[.date].flatMap(HTTPDate.parse).map { max(0, arrivedAt.timeIntervalSince($0)) } ?? 0
        return max(stated, apparent.isFinite ? apparent : 0)
    }

    /// The response's age at `now`: its initial age plus the time since it arrived.
    func age(at now: Date) -> TimeInterval {
        initialAge + max(0, now.timeIntervalSince(receivedAt))
    }

    func isFresh(at now: Date) -> Bool { age(at: now) < lifetime }

    /// How long past its freshness it is at `now` (negative while fresh).
    func staleness(at now: Date) -> TimeInterval { age(at: now) - lifetime }

    /// `value` as a disk entry keeps it: a keyed hash, never the value.
    static func sealed(_ value: String, with secret: [UInt8]) -> String {
        DiskCacheStore.hex(SHA256.hash(secret + Array(value.utf8)))
    }

    func matches(_ request: APIRequest) -> Bool {
        varying.allSatisfy { name, value in
            let asked = Self.normalised(request.headerFields[name], of: name)
            return varyingSecret.map { Self.sealed(asked, with: $0) == value } ?? (asked == value)
        }
    }

    /// A request field's value as `Vary` compares it (RFC 9111, 4.1): its lines combined
    /// (HTTPFields does that) and its outer whitespace gone; for the `Accept` fields,
    /// whose tokens hold no whitespace, every space outside quotes and every empty list
    /// element gone, and the case of those that ignore it lowered. No reordering: a
    /// value that only differs in order costs a miss, never a wrong answer.
    static func normalised(_ value: String?, of name: HTTPField.Name) -> String {
        guard let value else { return "" }
        let field = name.canonicalName
        guard field.hasPrefix("accept"), Self.listFields.contains(field) else { return value.trimmingCharacters(in: .whitespaces) }
        let lower = field != "accept"
        var elements: [String] = []
        var element = ""
        var quoted = false
        var escaped = false
        for character in value {
            if quoted {
                element.append(character)
                if escaped { escaped = false } else if character == "\\" { escaped = true } else if character == "\"" { quoted = false }
            } else if character == "," {
                if !element.isEmpty { elements.append(element) }
                element = ""
            } else if character != " ", character != "\t" {
                if character == "\"" { quoted = true }
                if lower { element += character.lowercased() } else { element.append(character) }
            }
        }
        if !element.isEmpty { elements.append(element) }
        return elements.joined(separator: ",")
    }

    private static let listFields: Set<String> = ["accept", "accept-charset", "accept-encoding", "accept-language"]

    /// `request` asking the server whether this entry is still current.
    func conditional(_ request: APIRequest) -> APIRequest {
        var request = request
        if let tag = headerFields[.eTag] { request.headerFields[.ifNoneMatch] = tag }
        if let modified = headerFields[.lastModified] { request.headerFields[.ifModifiedSince] = modified }
        return request
    }

    /// This entry with the header fields of a 304 or a HEAD that confirmed it (RFC 9111
    /// §3.2, §4.3.4, §4.3.5), except those that describe the stored body's bytes, which
    /// the transport may have decoded: a bodiless answer's say nothing about them.
    func refreshed(by notModified: APIResponse, at now: Date) -> CacheEntry {
        var fields = headerFields
        // Name by name, all of a name's lines: a second `Vary` or `Cache-Control` line
        // must not replace the first.
        for name in Set(notModified.headerFields.map(\.name)) where !Self.bodyFields.contains(name) {
            fields[values: name] = notModified.headerFields[values: name]
        }
        if notModified.headerFields[.age] == nil { fields[.age] = nil }
        // Its age from the 304's own Age and Date: a 304 without Date must not leave the
        // first answer's Date to count the time since as age.
        return CacheEntry(
            status: status, headerFields: fields, body: body, receivedAt: now, varying: varying, varyingSecret: varyingSecret,
            initialAge: Self.initialAge(of: notModified.headerFields, arrivedAt: Date()))
    }

    private static let bodyFields: Set<HTTPField.Name> = [.contentLength, .contentEncoding, .transferEncoding, .contentRange]

    /// Whether this entry, refreshed from `original`, may take its place: not when the
    /// refreshing answer says `no-store`, is private to the credentials `sent` carried,
    /// names other `Vary` fields than those the entry was chosen by, or brings an ETag
    /// that is not the entry's (it speaks for another body; 9111, 4.3.4).
    func mayReplace(_ original: CacheEntry, sent: APIRequest) -> Bool {
        // Weak or strong alike: a cache compares them weakly here.
        let tag = { (entry: CacheEntry) in
            entry.headerFields[.eTag].map { value in
                let trimmed = value.trimmingCharacters(in: .whitespaces)
                return trimmed.hasPrefix("W/") ? String(trimmed.dropFirst(2)) : trimmed
            }
        }
        return !directives.noStore && !(sent.carriesCredentials && !directives.isPublic)
            && Self.varyNames(headerFields).map(Set.init) == Set(original.varying.keys) && tag(self) == tag(original)
    }

    /// The request fields a response's `Vary` names; nil for `Vary: *` or a name that is
    /// no field name (such a response is never stored).
    static func varyNames(_ fields: HTTPFields) -> [HTTPField.Name]? {
        var names: [HTTPField.Name] = []
        for name in (fields[.vary] ?? "").split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !name.isEmpty {
            guard name != "*", let field = HTTPField.Name(name) else { return nil }
            names.append(field)
        }
        return names
    }

    /// The stored response, as the answer to `request`, with its current `Age`.
    func response(to request: APIRequest, at now: Date) -> APIResponse {
        var fields = headerFields
        let age = age(at: now)
        fields[.age] = String(age.isFinite ? Int(min(age, TimeInterval(CacheControl.maximumDeltaSeconds))) : CacheControl.maximumDeltaSeconds)
        return APIResponse(status: status, headerFields: fields, body: body, request: request)
    }
}

extension APIRequest {
    /// Whether the caller asked a conditional question of its own.
    var hasConditions: Bool {
        headerFields[.ifNoneMatch] != nil || headerFields[.ifModifiedSince] != nil
    }
}
