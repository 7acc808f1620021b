@testable import Catena
import Foundation
import HTTPTypes
import Testing

private let apiKey = HTTPField.Name("X-Api-Key")!

/// Answers at once (after a suspension or two) with who asked and for what, cacheable
/// for a minute: an answer that reaches the wrong caller shows in its body.
private struct WhoAsked: HTTPLoader {
    func load(_ request: APIRequest) async throws(CatenaError) -> APIResponse {
        for _ in 0..<Int.random(in: 0...3) { await Task.yield() }
        if Task.isCancelled { throw CatenaError(.cancelled, request: request) }
        let who = request.headerFields[apiKey] ?? request.headerFields[.authorization] ?? "nobody"
        return APIResponse(
            status: .ok, headerFields: [.cacheControl: "max-age=60", .eTag: "\"1\""],
            body: Data("\(who) \(request.percentEncodedPath)".utf8), request: request)
    }
}

/// Runs `work` in a task of its own and reports whether it finished within `limit`.
/// On a hang it calls `unstick` (a reset that frees waiters) and returns without
/// awaiting the work, so the test fails instead of hanging.
func finishes(
    within limit: Duration, unstick: @escaping @Sendable () async -> Void = {},
    _ work: @escaping @Sendable () async -> Void
) async -> Bool {
    let done = Catena.Locked(false)
    _ = Task {
        await work(); done.withLock { $0 = true }
    }
    let deadline = ContinuousClock.now + limit
    while ContinuousClock.now < deadline {
        if done.withLock({ $0 }) { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    await unstick()
    return false
}

/// Each stateful loader, hammered by many tasks with random cancels and resets: every
/// call ends (none hangs, none is resumed twice: a checked continuation would trap),
/// every answer belongs to the caller who got it, and nothing stays registered.
@Suite("Stateful loaders under contention")
struct StatefulLoaderStressTests {
    /// One round of `calls` loads from `workers` tasks; about a third are cancelled after
    /// a few yields, and one in 50 workers' steps resets the chain.
    private static func storm(
        _ chain: any HTTPLoader, workers: Int = 12, calls: Int = 300,
        request: @escaping @Sendable (_ identity: Int, _ path: Int) throws -> APIRequest,
        check: @escaping @Sendable (_ identity: Int, _ path: Int, Result<APIResponse, CatenaError>) -> Void
    ) async {
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<workers {
                group.addTask {
                    for _ in 0..<calls {
                        let identity = Int.random(in: 0..<3), path = Int.random(in: 0..<4)
                        let task = Task { () async -> Result<APIResponse, CatenaError> in
                            do { return .success(try await chain.load(try request(identity, path))) } catch {
                                return .failure(CatenaError.wrapping(error, request: .placeholder))
                            }
                        }
                        if Int.random(in: 0..<3) == 0 {
                            for _ in 0..<Int.random(in: 0...4) { await Task.yield() }
                            task.cancel()
                        }
                        if Int.random(in: 0..<50) == 0 { await chain.reset() }
                        check(identity, path, await task.value)
                    }
                }
            }
        }
    }

    @Test("ResetGuardMiddleware → DeduplicationMiddleware → CacheMiddleware: identities kept apart by their API keys, every call ends, nothing left registered")
    func dedupeAndCache() async throws {
        let guardLoader = ResetGuardMiddleware()
        let dedupe = DeduplicationMiddleware()
        let cache = CacheMiddleware()
        let chain = guardLoader --> dedupe --> cache --> WhoAsked()
        let wrong = Catena.Locked<[String]>([])
        let finished = await finishes(within: .seconds(120), unstick: { await chain.reset() }) {
            await Self.storm(
                chain,
                request: { identity, path in
                    var request = try APIRequest(
                        .get, urlString: "https://api.example.com/p\(path)",
                        headerFields: [apiKey: "key-\(identity)"])
                    request[option: DeduplicateRequest.self] = true
                    return request
                },
                check: { identity, path, result in
                    switch result {
                    case .success(let response):
                        let body = String(decoding: response.body, as: UTF8.self)
                        if body != "key-\(identity) /p\(path)" { wrong.withLock { $0.append("key-\(identity) /p\(path) got \(body)") } }
                    case .failure(let error):
                        if error.code != .cancelled && error.code != .resetInProgress { wrong.withLock { $0.append("\(error)") } }
                    }
                })
        }
        #expect(finished, "a call never ended")
        let mistakes = wrong.withLock { $0 }
        #expect(mistakes.count == 0, "first of them: \(mistakes.prefix(5))")
        #expect(guardLoader.inFlight == 0)
        #expect(dedupe.sharedCalls == 0)
    }

    @Test("ResetGuardMiddleware → TokenAuthMiddleware with slow and failing refreshes: every call ends, no waiter is left, a sent request always has a token")
    func tokenAuth() async throws {
        let refreshes = Catena.Locked(0)
        let auth = TokenAuthMiddleware(hosts: ["api.example.com"], leeway: .zero) { _ in
            let number = refreshes.withLock { count -> Int in
                count += 1
                return count
            }
            for _ in 0..<Int.random(in: 0...20) { await Task.yield() }
            if number % 4 == 0 { throw URLError(.userAuthenticationRequired) }
            // Every third token is born expired, so requests keep refreshing.
            return BearerToken(accessToken: "t\(number)", expiresAt: number % 3 == 0 ? Date(timeIntervalSinceNow: -1) : nil)
        }
        let guardLoader = ResetGuardMiddleware()
        let chain = guardLoader --> auth --> WhoAsked()
        let wrong = Catena.Locked<[String]>([])
        let finished = await finishes(within: .seconds(120), unstick: { await chain.reset() }) {
            await Self.storm(
                chain,
                request: { _, path in
                    try APIRequest(.get, urlString: "https://api.example.com/p\(path)")
                },
                check: { _, _, result in
                    switch result {
                    case .success(let response):
                        if !String(decoding: response.body, as: UTF8.self).hasPrefix("Bearer t") {
                            wrong.withLock { $0.append(String(decoding: response.body, as: UTF8.self)) }
                        }
                    case .failure(let error):
                        if ![.cancelled, .resetInProgress, .authenticationFailed].contains(error.code) { wrong.withLock { $0.append("\(error)") } }
                    }
                })
        }
        #expect(finished, "a call never ended")
        let mistakes = wrong.withLock { $0 }
        #expect(mistakes.count == 0, "first of them: \(mistakes.prefix(5))")
        #expect(guardLoader.inFlight == 0)
        #expect(auth.waitingForRefresh == 0)
        #expect(refreshes.withLock { $0 } > 0)
    }

    @Test("Composite routes and ThrottleMiddleware under resets: every call ends on the route it asked for")
    func compositeAndThrottle() async throws {
        let throttle = ThrottleMiddleware(maxInFlight: 2)
        let chain =
            ResetGuardMiddleware()
            --> Composite(
                [
                    .init(name: "a", loader: throttle --> WhoAsked()) { $0.percentEncodedPath.hasPrefix("/p0") },
                    .init(name: "b", loader: WhoAsked()),
                ], fallback: WhoAsked())
        let wrong = Catena.Locked<[String]>([])
        let finished = await finishes(within: .seconds(120), unstick: { await chain.reset() }) {
            await Self.storm(
                chain,
                request: { identity, path in
                    var request = try APIRequest(
                        .get, urlString: "https://api.example.com/p\(path)",
                        headerFields: [.authorization: "Bearer \(identity)"])
                    if path == 3 { request[option: CompositeRoute.self] = "b" }
                    return request
                },
                check: { identity, path, result in
                    switch result {
                    case .success(let response):
                        let body = String(decoding: response.body, as: UTF8.self)
                        if body != "Bearer \(identity) /p\(path)" { wrong.withLock { $0.append(body) } }
                    case .failure(let error):
                        if error.code != .cancelled && error.code != .resetInProgress { wrong.withLock { $0.append("\(error)") } }
                    }
                })
        }
        #expect(finished, "a call never ended")
        let mistakes = wrong.withLock { $0 }
        #expect(mistakes.count == 0, "first of them: \(mistakes.prefix(5))")
        #expect(throttle.waiting == 0)
        #expect(throttle.invariantHolds)
    }
}
