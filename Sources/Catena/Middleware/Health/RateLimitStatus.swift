public import Foundation
public import HTTPTypes

/// What a response says about its origin's rate limit: how many calls are left and when
/// the quota comes back, for one policy.
///
/// Read from the IETF httpapi fields (`RateLimit` and `RateLimit-Policy`, structured
/// fields; the earlier drafts' `RateLimit: limit=…, remaining=…, reset=…` and
/// `RateLimit-Limit`/`-Remaining`/`-Reset` too) and from the de-facto
/// `X-RateLimit-Limit`/`-Remaining`/`-Reset`, whose reset is delta seconds, epoch
/// seconds (GitHub) or epoch milliseconds, told apart by size.
///
/// Everything here comes from the server: values are clamped (remaining at most
/// 2³¹ − 1, reset at most a year), a malformed field is ignored, and quotas in other
/// units than requests are left out.
public struct RateLimitStatus: Sendable, Hashable {
    /// The policy's name (`RateLimit`'s item), or "" for a field without names.
    public var policy: String
    /// Calls left in the current window.
    public var remaining: Int
    /// Time until the quota is restored, from when the response was read; nil when the
    /// server did not say.
    public var reset: Duration?
    /// Calls allowed per window, when the server announced it.
    public var quota: Int?
    /// The window's length, when the server announced it.
    public var window: Duration?
    /// The partition the server counts this call in (`pk`), when it named one.
    public var partition: String?

    /// A status; values are clamped as a parsed one's are.
    public init(policy: String = "", remaining: Int, reset: Duration?, quota: Int? = nil, window: Duration? = nil, partition: String? = nil) {
        self.policy = policy
        self.remaining = min(max(0, remaining), Self.largestCount)
        self.reset = reset.map { min(max(.zero, $0), Self.longestReset) }
        self.quota = quota.map { min(max(0, $0), Self.largestCount) }
        self.window = window.map { min(max(.zero, $0), Self.longestReset) }
        self.partition = partition
    }

    static let largestCount = Int(Int32.max)

    /// The key a limiter keeps this policy's window under: its name, and its `pk`
    /// partition (cut to 64 bytes), so that partitions' windows stay apart.
    var windowKey: String {
        guard let partition, !partition.isEmpty else { return policy }
        return policy + "\u{1F}" + String(decoding: partition.utf8.prefix(64), as: UTF8.self)
    }
    static let longestReset = Duration.seconds(365 * 24 * 3600)

    /// The statuses `fields` announce, one per policy; empty when there are none or
    /// none could be read. `now` reads epoch resets.
    public static func statuses(in fields: HTTPFields, now: Date = Date()) -> [RateLimitStatus] {
        let ietf = ietfStatuses(in: fields)
        if !ietf.isEmpty { return ietf }
        return legacyStatus(in: fields, prefix: "X-RateLimit-", now: now).map { [$0] }
            ?? legacyStatus(in: fields, prefix: "RateLimit-", now: now).map { [$0] } ?? []
    }

    // MARK: IETF httpapi

    private static func joined(_ fields: HTTPFields, _ name: String) -> String? {
        guard let name = HTTPField.Name(name) else { return nil }
        let values = fields[values: name]
        return values.isEmpty ? nil : values.joined(separator: ", ")
    }

    /// The current draft's lists, or the earlier dictionary form of `RateLimit`.
    private static func ietfStatuses(in fields: HTTPFields) -> [RateLimitStatus] {
        guard let field = joined(fields, "RateLimit") else { return [] }
        var policies: [String: (quota: Int?, window: Duration?)] = [:]
        var unnamedPolicies: [(quota: Int?, window: Duration?)] = []
        var otherUnits: Set<String> = []
        if let policyField = joined(fields, "RateLimit-Policy"), let items = StructuredField.list(policyField) {
            for item in items {
                if let unit = item.parameter("qu")?.text, unit != "requests" {
                    if let name = item.value.text { otherUnits.insert(name) }
                    continue
                }
                let window = (item.parameter("w") ?? item.parameter("window"))?.number.flatMap(seconds)
                switch item.value {
                case .string(let name), .token(let name):
                    policies[name] = (item.parameter("q")?.number.flatMap(count), window)
                case .integer(let quota):
                    unnamedPolicies.append((count(Double(quota)), window))
                default: continue
                }
            }
        }
        if let items = StructuredField.list(field), !items.isEmpty, items.allSatisfy({ $0.parameter("r") != nil }) {
            return items.compactMap { item -> RateLimitStatus? in
                guard let name = item.value.text, let remaining = item.parameter("r")?.number.flatMap(count) else { return nil }
                guard !otherUnits.contains(name) else { return nil }  // bytes or concurrency, not calls
                let reset = item.parameter("t")?.number.flatMap(seconds)
                let policy = policies[name]
                return RateLimitStatus(
                    policy: name, remaining: remaining, reset: reset, quota: policy?.quota ?? nil, window: policy?.window ?? nil,
                    partition: item.parameter("pk")?.text)
            }
        }
        // Drafts 05 to 07: `RateLimit: limit=10, remaining=5, reset=4`.
        guard let members = StructuredField.dictionary(field),
            let remaining = members.last(where: { $0.key == "remaining" })?.item.value.number.flatMap(count)
        else { return [] }
        let limit = members.last { $0.key == "limit" }?.item.value.number.flatMap(count)
        let reset = members.last { $0.key == "reset" }?.item.value.number.flatMap(seconds)
        let window = unnamedPolicies.first { $0.quota == limit }?.window ?? nil
        return [RateLimitStatus(remaining: remaining, reset: reset, quota: limit, window: window)]
    }

    // MARK: X-RateLimit-* and RateLimit-*

    private static func legacyStatus(in fields: HTTPFields, prefix: String, now: Date) -> RateLimitStatus? {
        func number(_ suffix: String) -> Double? {
            // A list of values (`10, 10;w=1`) names the current limit first.
            guard let text = joined(fields, prefix + suffix) else { return nil }
            let first = text.split(separator: ",", maxSplits: 1).first.map { $0.split(separator: ";").first ?? $0 } ?? ""
            return Double(first.trimmingCharacters(in: .whitespaces)).flatMap { $0.isFinite ? $0 : nil }
        }
        guard let remaining = number("Remaining").flatMap(count) else { return nil }
        var reset: Duration?
        if let after = number("Reset-After").flatMap(seconds) {
            reset = after
        } else if let value = number("Reset"), value >= 0 {
            // 1e9 seconds is 2001: no window is that long, so a value that large is a date.
            let epoch = now.timeIntervalSince1970
            if value >= 1e12 {
                reset = seconds(value / 1000 - epoch) ?? .zero
            } else if value >= 1e9 {
                reset = seconds(value - epoch) ?? .zero
            } else {
                reset = seconds(value) ?? .zero
            }
        }
        return RateLimitStatus(remaining: remaining, reset: reset, quota: number("Limit").flatMap(count))
    }

    // MARK: Numbers from the wire

    /// A count, or nil when negative or not finite.
    private static func count(_ value: Double) -> Int? {
        guard value.isFinite, value >= 0 else { return nil }
        return Int(min(value.rounded(.down), Double(largestCount)))
    }

    /// Seconds as a duration, clamped to a year; nil when not finite. Negative becomes zero.
    private static func seconds(_ value: Double) -> Duration? {
        guard value.isFinite else { return nil }
        let longest = Double(longestReset.components.seconds)
        return .milliseconds(Int64((min(max(0, value), longest) * 1000).rounded(.up)))
    }
}

extension APIResponse {
    /// The rate-limit statuses this response announces; see ``RateLimitStatus``.
    public var rateLimits: [RateLimitStatus] {
        RateLimitStatus.statuses(in: headerFields)
    }
}
