import Foundation
import HTTPTypes

/// The directives of a `Cache-Control` field that a private cache acts on (RFC 9111
/// section 5.2, RFC 5861), of a response or of a request.
struct CacheControl: Sendable, Equatable {
    var maxAge: Int?
    var noStore = false
    /// With or without field names: a private cache treats both as unqualified (9111, 5.2.2.4).
    var noCache = false
    var isPublic = false
    var mustRevalidate = false
    /// Request: how stale an answer may be; `max-stale` without a value, any.
    var maxStale: Int?
    /// Request: how long an answer must stay fresh still.
    var minFresh: Int?
    var onlyIfCached = false
    /// Response (RFC 5861): how long past its freshness it may answer at once while revalidated.
    var staleWhileRevalidate: Int?
    /// Response or request (RFC 5861): how long past its freshness it may answer when the origin fails.
    var staleIfError: Int?

    init(_ value: String?) {
        guard let value else { return }
        for part in value.split(separator: ",") {
            // Empty pieces ("=", "no-cache,=") are kept, so there is always a name.
            let pieces = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let first = pieces.first else { continue }
            let name = first.trimmingCharacters(in: .whitespaces).lowercased()
            let argument = pieces.count > 1 ? pieces[1].trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "\"")) : nil
            switch name {
            // The first of a repeated directive counts (RFC 9111, 4.2.1).
            case "max-age": maxAge = maxAge ?? argument.map(Self.deltaSeconds) ?? 0
            case "no-store": noStore = true
            case "no-cache": noCache = true
            case "public": isPublic = true
            // proxy-revalidate binds shared caches only; must-revalidate binds this one.
            case "must-revalidate": mustRevalidate = true
            case "max-stale": maxStale = maxStale ?? argument.map(Self.deltaSeconds) ?? Self.maximumDeltaSeconds
            case "min-fresh": minFresh = minFresh ?? argument.map(Self.deltaSeconds) ?? 0
            case "only-if-cached": onlyIfCached = true
            case "stale-while-revalidate": staleWhileRevalidate = staleWhileRevalidate ?? argument.map(Self.deltaSeconds) ?? 0
            case "stale-if-error": staleIfError = staleIfError ?? argument.map(Self.deltaSeconds) ?? 0
            default: break
            }
        }
    }

    /// The largest delta-seconds a cache must accept (RFC 9111, section 1.2.2: 2^31).
    static let maximumDeltaSeconds = 2_147_483_648

    /// delta-seconds: digits only; larger than 2^31 means 2^31; anything else is 0
    /// (a malformed `max-age` makes the response stale, as RFC 9111 asks).
    static func deltaSeconds<Text: StringProtocol>(_ text: Text) -> Int {
        guard !text.isEmpty, text.utf8.allSatisfy({ (48...57).contains($0) }) else { return 0 }
        return Int(text).map { min($0, maximumDeltaSeconds) } ?? maximumDeltaSeconds
    }
}
