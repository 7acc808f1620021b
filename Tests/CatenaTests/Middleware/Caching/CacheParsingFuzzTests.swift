@testable import Catena
import CatenaTesting
import Foundation
import HTTPTypes
import Testing
import CatenaDemoServer

/// Random and adversarial header values for the HTTP cache's parsers: none may trap,
/// and well-formed values mean what they say.
@Suite("CacheMiddleware parsers under hostile input")
struct CacheParsingFuzzTests {
    static let pieces = [
        "=", ",", " ", "\"", "max-age", "no-cache", "no-store", "public", "private", "0", "-1", "60",
        "1e19", "inf", "nan", "-inf", "99999999999999999999999", "0x10", "3.5", "W/", "*", ";", "\t",
        "GMT", "Sun, 06 Nov 1994 08:49:37 GMT", "Accept", "é", "\u{0}",
    ]

    static func randomValue(_ generator: inout some RandomNumberGenerator) -> String {
        (0..<Int.random(in: 0...8, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
    }

    @Test(
        "adversarial values seen in the wild do not trap",
        arguments: [
            "=", "no-cache,=", ",,,", "max-age=", "max-age==", "=60",
            "max-age=1e19", "max-age=-1", "max-age=inf",
        ])
    func knownBad(value: String) {
        _ = CacheControl(value)
        let request = APIRequest(.get, url: URL(string: "http://127.0.0.1/x")!)
        for age in ["1e19", "inf", "-inf", "nan", "-5", "99999999999999999999", "", " 7 "] {
            let response = APIResponse(status: .ok, headerFields: [.cacheControl: value, .age: age, .eTag: "\"a\""], body: Data(), request: request)
            let entry = CacheEntry(response: response, request: request, receivedAt: Date())
            let served = entry?.response(to: request, at: Date().addingTimeInterval(1e12))
            #expect(served.map { Int($0.headerFields[.age] ?? "") != nil } ?? true, "Age \(age) is served as a number")
        }
    }

    @Test("2,000 random Cache-Control, Age, Expires, Date and Vary values never trap")
    func random() {
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
        let request = APIRequest(.get, url: URL(string: "http://127.0.0.1/x")!)
        var stored = 0
        for _ in 0..<2_000 {
            var fields = HTTPFields()
            for name: HTTPField.Name in [.cacheControl, .age, .expires, .date, .vary, .eTag] where Bool.random(using: &generator) {
                // HTTPFields refuses what HTTP forbids; anything it accepts is fair game.
                fields[name] = Self.randomValue(&generator)
            }
            let response = APIResponse(status: .ok, headerFields: fields, body: Data(), request: request)
            if let entry = CacheEntry(response: response, request: request, receivedAt: Date()) {
                stored += 1
                _ = entry.isFresh(at: Date())
                let served = entry.response(to: request, at: Date().addingTimeInterval(Double.random(in: -1e9...1e12, using: &generator)))
                #expect(Int(served.headerFields[.age] ?? "0") != nil, "seed \(seed): \(fields)")
            }
        }
        #expect(stored > 0, "some random responses were storable, so the entry paths ran; seed \(seed)")
    }

    @Test("well-formed directives round-trip", arguments: [0, 1, 60, 86_400, 2_147_483_648])
    func wellFormed(seconds: Int) {
        let directives = CacheControl("public, max-age=\(seconds), no-cache")
        #expect(directives.maxAge == seconds)
        #expect(directives.isPublic && directives.noCache && !directives.noStore)
        #expect(CacheControl("max-age=\"\(seconds)\"").maxAge == seconds)
        #expect(CacheControl("max-age=99999999999999999999").maxAge == CacheControl.maximumDeltaSeconds)
    }
}
