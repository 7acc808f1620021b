@testable import Catena
import Foundation
import HTTPTypes
import Testing

/// For random sequences of requests, answers and clock steps, the cache never serves
/// what RFC 9111 and RFC 5861 forbid: a `no-store` answer, another `Vary` value's or
/// another identity's, a stale one beyond what the directives (or, without a lifetime,
/// the heuristic from `Last-Modified`) allow; `only-if-cached`
/// and offline requests never reach the origin; each call looked up reports one outcome.
@Suite("CacheMiddleware: random sequences against the rules")
struct CachePropertyTests {
    @Test("2,400 random steps in 24 seeded runs, memory and disk: nothing the rules forbid is served")
    func neverServesWhatTheRulesForbid() async throws {
        for seed in 0..<24 {
            let directory = seed % 2 == 1 ? FileManager.default.temporaryDirectory.appending(path: "catena-prop-\(UUID().uuidString)") : nil
            defer { if let directory { try? FileManager.default.removeItem(at: directory) } }
            try await Self.run(seed: UInt64(seed), directory: directory)
        }
    }

    static func run(seed: UInt64, directory: URL?) async throws {
        var random = SeededRandom(seed: seed)
        let clock = TestClock()
        let origin = RandomOrigin(seed: seed, clock: clock)
        let cache = CacheMiddleware(directory: directory, now: clock.read)
        let chain = cache --> origin
        for step in 0..<100 {
            clock.advance(TimeInterval(random.next(upTo: 4) == 0 ? random.next(upTo: 40) : random.next(upTo: 6)))
            var request = try APIRequest(.get, urlString: "http://127.0.0.1:9/" + ["a", "b"][random.next(upTo: 2)])
            // " text/x" is "text/x" to Vary (9111, 4.1: whitespace is normalised).
            request.headerFields[.accept] = ["text/x", "text/y", " text/x"][random.next(upTo: 3)]
            if let token = [nil, "Bearer one", "Bearer two"][random.next(upTo: 3)] { request.headerFields[.authorization] = token }
            var asked: [String] = []
            if random.next(upTo: 6) == 0 { asked.append("max-age=\(random.next(upTo: 20))") }
            if random.next(upTo: 6) == 0 { asked.append(random.next(upTo: 2) == 0 ? "max-stale" : "max-stale=\(random.next(upTo: 30))") }
            if random.next(upTo: 8) == 0 { asked.append("min-fresh=\(random.next(upTo: 10))") }
            if random.next(upTo: 10) == 0 { asked.append("no-cache") }
            if random.next(upTo: 10) == 0 { asked.append("only-if-cached") }
            if random.next(upTo: 10) == 0 { asked.append("stale-if-error=\(random.next(upTo: 30))") }
            if !asked.isEmpty { request.headerFields[.cacheControl] = asked.joined(separator: ", ") }
            if random.next(upTo: 12) == 0 { request[option: CacheOffline.self] = true }
            let directives = CacheControl(request.headerFields[.cacheControl])
            let offline = request[option: CacheOffline.self]
            let outcomes = Locked<[CallEvent.CacheOutcome]>([])
            request.observe(CallObserver { event in if case .cache(let outcome) = event { outcomes.withLock { $0.append(outcome) } } })

            let before = origin.foreground.withLock { $0.count }
            let response: APIResponse?
            do { response = try await chain.load(request) } catch { response = nil }
            let calls = origin.foreground.withLock { Array($0[before...]) }
            let context = "seed \(seed) step \(step) \(asked) offline \(offline)"
            let reported = outcomes.withLock { $0 }
            try #require(reported.count == 1, "one cache outcome per call: \(reported), \(context)")
            let outcome = reported[0]
            if directives.onlyIfCached || offline { #expect(calls.isEmpty, "never the network: \(context)") }
            guard let response, response.status == .ok, let served = origin.answer(in: response) else { continue }

            // What the cache served, against what it was an answer to.
            if outcome != .miss {
                #expect(!served.noStore, "a no-store answer: \(context)")
                #expect(served.path == (try? request.urlString()), "another URL's: \(context)")
                #expect(served.identity == request.headerFields[.authorization], "another identity's: \(context)")
                if served.varies {
                    let same = served.accept?.trimmingCharacters(in: .whitespaces) == request.headerFields[.accept]?.trimmingCharacters(in: .whitespaces)
                    #expect(same, "another Vary value's: \(context)")
                }
            }
            let now = clock.read()
            let since = origin.validated(served.serial) ?? served.at
            let age = now.timeIntervalSince(since)
            // Without max-age, a tenth of how long it had not changed when received, at most a day (4.2.2).
            let heuristic = served.lastModified.map { min(max(0, since.timeIntervalSince($0) / 10), 86_400) } ?? 0
            let staleness = age - (served.maxAge.map(TimeInterval.init) ?? heuristic)
            let mayBeStale = !served.mustRevalidate && !served.noCache && !directives.noCache
            switch outcome {
            case .hit:
                #expect(staleness < 0 && !served.noCache && !directives.noCache, "a hit that was not fresh: \(context)")
                if let maxAge = directives.maxAge { #expect(maxAge > 0 && age <= TimeInterval(maxAge), "older than the request's max-age: \(context)") }
                if let minFresh = directives.minFresh { #expect(-staleness >= TimeInterval(minFresh), "fresh for less than min-fresh: \(context)") }
            case .stale:
                let allowed =
                    offline || directives.maxStale.map { staleness <= TimeInterval($0) } ?? false
                    || served.staleWhileRevalidate.map { staleness <= TimeInterval($0) } ?? false
                #expect(mayBeStale && allowed, "a stale answer no directive allowed (stale by \(staleness)): \(context)")
            case .staleIfError:
                #expect(calls.contains { $0.failed }, "stale-if-error with no failure: \(context)")
                let window = max(served.staleIfError ?? -1, directives.staleIfError ?? -1)
                #expect(mayBeStale && staleness <= TimeInterval(window), "stale beyond stale-if-error: \(context)")
            case .revalidated:
                #expect(calls.contains { $0.notModified == served.serial }, "revalidated without a 304: \(context)")
            case .miss:
                #expect(calls.contains { $0.sent == served.serial }, "a miss not from the origin: \(context)")
            case .unavailable:
                Issue.record("a 200 reported unavailable: \(context)")
            }
        }
        // No refresh outlives the run (its directory, the origin's random draws).
        await cache.reset()
    }
}

@Suite("RecencyOrder: least recently used first")
struct RecencyOrderTests {
    @Test("20,000 random touches, removals and pops agree with a model that scans for the oldest")
    func agreesWithAScan() {
        var random = SeededRandom(seed: 7)
        var order = RecencyOrder()
        var model: [String: Int] = [:]
        var clock = 0
        for step in 0..<20_000 {
            let key = "k\(random.next(upTo: 300))"
            switch random.next(upTo: 10) {
            case 0..<6:
                clock += 1
                model[key] = clock
                order.touch(key)
            case 6..<8:
                model[key] = nil
                order.remove(key)
            default:
                let oldest = model.min { $0.value < $1.value }?.key
                #expect(order.popOldest() == oldest, "step \(step)")
                if let oldest { model[oldest] = nil }
            }
        }
        while let oldest = model.min(by: { $0.value < $1.value })?.key {
            #expect(order.popOldest() == oldest)
            model[oldest] = nil
        }
        #expect(order.popOldest() == nil)
    }
}

/// A deterministic generator (SplitMix64), so a failing seed can be run again.
private struct SeededRandom {
    private var state: UInt64
    init(seed: UInt64) { state = seed &+ 0x9E37_79B9_7F4A_7C15 }
    mutating func next(upTo bound: Int) -> Int {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return Int((z ^ (z >> 31)) % UInt64(bound))
    }
}

/// An origin that answers with random directives, each answer numbered in its body; a
/// conditional request gets a 304 half the time; one call in six fails (503, or no answer).
private final class RandomOrigin: HTTPLoader {
    struct Answer: Sendable {
        var serial: Int
        var path: String
        var identity: String?
        var accept: String?
        var at: Date
        var maxAge: Int?
        var noStore = false
        var noCache = false
        var mustRevalidate = false
        var varies = false
        var staleWhileRevalidate: Int?
        var staleIfError: Int?
        /// Its Last-Modified, as a cache reads it back (whole seconds).
        var lastModified: Date?
    }

    /// One call from a caller (not a background refresh): what came of it.
    struct Call: Sendable {
        var sent: Int?
        var notModified: Int?
        var failed = false
    }

    private let random: Locked<SeededRandom>
    private let clock: TestClock
    private let answers = Locked<[Int: Answer]>([:])
    private let validations = Locked<[Int: Date]>([:])
    let foreground = Locked<[Call]>([])

    init(seed: UInt64, clock: TestClock) {
        random = Locked(SeededRandom(seed: seed ^ 0xABCD))
        self.clock = clock
    }

    func answer(in response: APIResponse) -> Answer? {
        Int(String(decoding: response.body, as: UTF8.self)).flatMap { serial in answers.withLock { $0[serial] } }
    }

    /// When a 304 last confirmed `serial`.
    func validated(_ serial: Int) -> Date? { validations.withLock { $0[serial] } }

    func load(_ request: APIRequest) async throws(CatenaError) -> APIResponse {
        // The cache strips its background refreshes' observers.
        let isForeground = !request[option: CallObservers.self].isEmpty
        func record(_ call: Call) { if isForeground { foreground.withLock { $0.append(call) } } }
        let draw = random.withLock { random in (0..<12).map { _ in random.next(upTo: 100) } }
        if draw[0] < 8 {
            record(Call(failed: true))
            throw CatenaError(.cannotConnect, request: request)
        }
        if draw[0] < 17 {
            record(Call(failed: true))
            return APIResponse(status: .serviceUnavailable, headerFields: [:], body: Data("failing".utf8), request: request)
        }
        if let tag = request.headerFields[.ifNoneMatch], draw[1] < 50, let serial = Int(tag.trimmingCharacters(in: CharacterSet(charactersIn: "\""))) {
            validations.withLock { $0[serial] = clock.read() }
            record(Call(notModified: serial))
            return APIResponse(status: .notModified, headerFields: [.eTag: tag], body: Data(), request: request)
        }
        // Numbered under the lock that records it: a background refresh may answer at once.
        let serial = answers.withLock { answers in
            let serial = answers.count + 1
            answers[serial] = Answer(serial: serial, path: "", at: .distantPast)
            return serial
        }
        var answer = Answer(
            serial: serial, path: (try? request.urlString()) ?? "", identity: request.headerFields[.authorization], accept: request.headerFields[.accept],
            at: clock.read())
        var directives: [String] = []
        if draw[2] < 70 { answer.maxAge = draw[3] % 25 }
        if draw[4] < 10 { answer.noStore = true }
        if draw[5] < 10 { answer.noCache = true }
        if draw[6] < 15 { answer.mustRevalidate = true }
        if draw[7] < 30 { answer.staleWhileRevalidate = draw[3] % 30 }
        if draw[8] < 30 { answer.staleIfError = draw[8] % 30 }
        answer.varies = draw[9] < 50
        if let maxAge = answer.maxAge { directives.append("max-age=\(maxAge)") }
        if answer.noStore { directives.append("no-store") }
        if answer.noCache { directives.append("no-cache") }
        if answer.mustRevalidate { directives.append("must-revalidate") }
        if let window = answer.staleWhileRevalidate { directives.append("stale-while-revalidate=\(window)") }
        if let window = answer.staleIfError { directives.append("stale-if-error=\(window)") }
        // Public, so that answers to a token are kept (each identity's apart).
        directives.append("public")
        var fields: HTTPFields = [.cacheControl: directives.joined(separator: ", "), .eTag: "\"\(serial)\""]
        if draw[10] < 40 {
            let text = HTTPDate.format(answer.at.addingTimeInterval(-TimeInterval(draw[11] * 4)))
            fields[.lastModified] = text
            answer.lastModified = HTTPDate.parse(text)
        }
        if answer.varies { fields[.vary] = "Accept" }
        answers.withLock { $0[serial] = answer }
        record(Call(sent: serial))
        return APIResponse(status: .ok, headerFields: fields, body: Data(String(serial).utf8), request: request)
    }
}
