import Catena
import CatenaDemoServer
import Foundation
import HTTPTypes
import Testing

@Suite("Rate-limit fields: IETF RateLimit and RateLimit-Policy, X-RateLimit-*, and hostile values")
struct RateLimitFieldsTests {
    private func fields(_ pairs: [(String, String)]) -> HTTPFields {
        var fields = HTTPFields()
        for (name, value) in pairs { fields.append(HTTPField(name: HTTPField.Name(name)!, value: value)) }
        return fields
    }

    @Test("the current draft: named policies with quota and window, remaining and reset per policy")
    func currentDraft() {
        let statuses = RateLimitStatus.statuses(
            in: fields([
                ("RateLimit-Policy", #""burst";q=100;w=60, "daily";q=1000;w=86400;qu="requests", "bytes";q=1000000;qu="content-bytes""#),
                ("RateLimit", #""burst";r=50;t=30, "daily";r=999;t=3600;pk=:cHJvamVjdC0xMjM=:, "bytes";r=5;t=1"#),
            ]))
        #expect(
            statuses == [
                RateLimitStatus(policy: "burst", remaining: 50, reset: .seconds(30), quota: 100, window: .seconds(60)),
                RateLimitStatus(
                    policy: "daily", remaining: 999, reset: .seconds(3600), quota: 1000, window: .seconds(86400), partition: "cHJvamVjdC0xMjM="),
            ])
    }

    @Test("earlier drafts: the dictionary form and separate RateLimit-Limit, -Remaining, -Reset")
    func earlierDrafts() {
        #expect(
            RateLimitStatus.statuses(in: fields([("RateLimit", "limit=10, remaining=5, reset=4"), ("RateLimit-Policy", "10;w=1, 50;w=60")]))
                == [RateLimitStatus(remaining: 5, reset: .seconds(4), quota: 10, window: .seconds(1))])
        #expect(
            RateLimitStatus.statuses(in: fields([("RateLimit-Limit", "10, 10;window=1"), ("RateLimit-Remaining", "3"), ("RateLimit-Reset", "7")]))
                == [RateLimitStatus(remaining: 3, reset: .seconds(7), quota: 10)])
    }

    @Test("X-RateLimit-Reset as delta seconds, epoch seconds and epoch milliseconds; Reset-After first")
    func legacyResets() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        func reset(_ pairs: [(String, String)]) -> Duration? {
            RateLimitStatus.statuses(in: fields([("X-RateLimit-Remaining", "1")] + pairs), now: now).first?.reset
        }
        #expect(reset([("X-RateLimit-Reset", "30")]) == .seconds(30))
        #expect(reset([("X-RateLimit-Reset", "1800000042")]) == .seconds(42))
        #expect(reset([("X-RateLimit-Reset", "1800000042500")]) == .milliseconds(42_500))
        #expect(reset([("X-RateLimit-Reset", "1799999999")]) == .zero)  // already past
        #expect(reset([("X-RateLimit-Reset", "1800000042"), ("X-RateLimit-Reset-After", "1.5")]) == .milliseconds(1500))
        #expect(RateLimitStatus.statuses(in: fields([("X-RateLimit-Limit", "60")])).isEmpty)  // nothing left to say without Remaining
        #expect(reset([]) == nil)  // no reset said: not "now"
    }

    @Test("hostile values are clamped or dropped, and malformed fields ignored whole")
    func hostile() {
        let huge = RateLimitStatus.statuses(in: fields([("RateLimit", #""x";r=999999999999999;t=999999999999999"#)]))
        #expect(huge.first?.remaining == Int(Int32.max))
        #expect(huge.first?.reset == .seconds(365 * 24 * 3600))
        #expect(RateLimitStatus.statuses(in: fields([("RateLimit", #""x";r=-1;t=5"#)])).isEmpty)
        #expect(RateLimitStatus.statuses(in: fields([("RateLimit", #""x";r=1;t=5, garbage=("#)])).isEmpty)
        #expect(RateLimitStatus.statuses(in: fields([("RateLimit", #""x";r=1;t=1234567890123456"#)])).isEmpty)  // 16 digits
        #expect(RateLimitStatus.statuses(in: fields([("X-RateLimit-Remaining", "-5")])).isEmpty)
        #expect(RateLimitStatus.statuses(in: fields([("X-RateLimit-Remaining", "nan")])).isEmpty)
        #expect(
            RateLimitStatus.statuses(in: fields([("X-RateLimit-Remaining", "1e308"), ("X-RateLimit-Reset", "1e308")])).first?.remaining
                == Int(Int32.max))
    }

    /// The fuzz cases run beside timing-sensitive suites on the two threads of Swift's
    /// cooperative pool: they yield every 50 cases rather than hold a thread for a second.
    @Test("any bytes: parsing never traps and every status stays within its bounds", arguments: 0..<4)
    func fuzz(seed: UInt64) async {
        var random = SplitMix64(seed: seed &+ 0x5EED)
        let alphabet = Array(#""';=,:()?*-.0123456789 \abcdefrqtwpkz@%xX"#.utf8) + [0x09, 0x7F, 0xC3, 0xA9]
        for round in 0..<500 {
            if round % 50 == 0 { await Task.yield() }
            let length = Int(random.next() % 48)
            let bytes = (0..<length).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] }
            let text = String(decoding: bytes, as: UTF8.self).replacingOccurrences(of: "\r", with: "").replacingOccurrences(of: "\n", with: "")
            for name in ["RateLimit", "RateLimit-Policy", "X-RateLimit-Remaining", "X-RateLimit-Reset"] {
                var pairs = [(name, text)]
                if name != "RateLimit" { pairs.append(("RateLimit", #""a";r=1;t=1"#)) }
                if name == "X-RateLimit-Reset" { pairs = [(name, text), ("X-RateLimit-Remaining", "1")] }
                for status in RateLimitStatus.statuses(in: fields(pairs)) {
                    #expect((0...Int(Int32.max)).contains(status.remaining))
                    if let reset = status.reset { #expect(reset >= .zero && reset <= .seconds(365 * 24 * 3600)) }
                }
            }
        }
    }

    @Test("any valid policy survives being written and read back", arguments: 0..<4)
    func roundTrip(seed: UInt64) async {
        var random = SplitMix64(seed: seed &+ 77)
        for round in 0..<250 {
            if round % 50 == 0 { await Task.yield() }
            let count = Int(random.next() % 3) + 1
            var expected: [RateLimitStatus] = []
            var policies: [String] = [], limits: [String] = []
            for index in 0..<count {
                let name = "p\(index)-\(random.next() % 1000)"
                let quota = Int(random.next() % 100_000), window = Int(random.next() % 86_400) + 1
                let remaining = Int(random.next() % UInt64(quota + 1)), reset = Int(random.next() % UInt64(window + 1))
                policies.append(#""\#(name)";q=\#(quota);w=\#(window)"#)
                limits.append(#""\#(name)";r=\#(remaining);t=\#(reset)"#)
                expected.append(RateLimitStatus(policy: name, remaining: remaining, reset: .seconds(reset), quota: quota, window: .seconds(window)))
            }
            let read = RateLimitStatus.statuses(
                in: fields([("RateLimit-Policy", policies.joined(separator: ", ")), ("RateLimit", limits.joined(separator: ",\t"))]))
            #expect(read == expected)
        }
    }
}
