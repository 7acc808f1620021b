import Foundation
import HTTPTypes

/// The directives of a `Cache-Control` field that a private cache acts on.
struct CacheControl: Sendable, Equatable {
    var maxAge: Int?
    var noStore = false
    var noCache = false
    var isPublic = false

    init(_ value: String?) {
        guard let value else { return }
        for part in value.split(separator: ",") {
            // Empty pieces ("=", "no-cache,=") are kept, so there is always a name.
            let pieces = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let first = pieces.first else { continue }
            let name = first.trimmingCharacters(in: .whitespaces).lowercased()
            let argument = pieces.count > 1 ? pieces[1].trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "\"")) : nil
            switch name {
            case "max-age": maxAge = argument.map(Self.deltaSeconds) ?? 0
            case "no-store": noStore = true
            case "no-cache": noCache = true
            case "public": isPublic = true
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
