@testable import Catena
import CatenaTesting
import Foundation
import Testing

/// A wait that cancellation cannot interrupt, like a refresh stuck in a library that
/// ignores cancellation: it ends only when the test opens it.
private final class Latch: Sendable {
    private let state = Catena.Locked<(open: Bool, waiting: [CheckedContinuation<Void, Never>], entered: Int)>((false, [], 0))

    func wait() async {
        await withCheckedContinuation { continuation in
            let resume = state.withLock { state -> Bool in
                state.entered += 1
                if state.open { return true }
                state.waiting.append(continuation)
                return false
            }
            if resume { continuation.resume() }
        }
    }

    var entered: Int { state.withLock { $0.entered } }

    func open() {
        let waiting = state.withLock { state in
            state.open = true
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in waiting { continuation.resume() }
    }
}

private struct FixedClock: RetryClock {
    let date: Date
    func now() -> Date { date }
    func sleep(for duration: Duration) async throws {}
}

@Suite("TokenAuthMiddleware")
struct TokenAuthTests {
    @Test("reset returns at once while a refresh that ignores cancellation runs, and the waiting request ends cancelled (issue 11, defect 4)")
    func resetDoesNotWaitForRefresh() async throws {
        let latch = Latch()
        let mock = MockTransport()
        let guardLoader = ResetGuardMiddleware()
        let chain =
            guardLoader
            --> TokenAuthMiddleware(hosts: ["api.example.com"]) { _ in
                await latch.wait()
                return BearerToken(accessToken: "late")
            } --> mock
        let request = try APIRequest(.get, urlString: "https://api.example.com/me")
        let call = Task { try await chain.load(request) }
        while latch.entered == 0 { try await Task.sleep(for: .milliseconds(5)) }

        let reset = await finishes(within: .seconds(10)) { await chain.reset() }
        #expect(reset, "reset waited for the refresh")
        let result = await finishes(within: .seconds(10)) { _ = await call.result }
        #expect(result)
        latch.open()
        await #expect(throws: CatenaError.self) { try await call.value }
        #expect((try? await call.value) == nil)
        if case .failure(let error as CatenaError) = await call.result { #expect(error.code == .cancelled) }
        #expect(mock.requests.isEmpty, "no request went out with the late token")
        #expect(guardLoader.inFlight == 0)
    }

    @Test("reset alone (no ResetGuardMiddleware) ends the waiting request, and the late refresh's token is not kept")
    func resetWithoutGuard() async throws {
        let latch = Latch()
        let mock = MockTransport()
        let auth = TokenAuthMiddleware(hosts: ["api.example.com"]) { _ in
            await latch.wait()
            return BearerToken(accessToken: "late")
        }
        let chain = auth --> mock
        let call = Task { try await chain.load(try APIRequest(.get, urlString: "https://api.example.com/me")) }
        while auth.waitingForRefresh == 0 { try await Task.sleep(for: .milliseconds(5)) }
        await chain.reset()
        let ended = await finishes(within: .seconds(10)) { _ = await call.result }
        #expect(ended, "the waiting request ended with the reset")
        if case .failure(let error as CatenaError) = await call.result { #expect(error.code == .cancelled) } else { Issue.record("the request went on") }
        latch.open()
        try await Task.sleep(for: .milliseconds(100))
        #expect(auth.currentToken == nil, "the refresh that was running at logout does not log back in")
        #expect(mock.requests.isEmpty)
    }

    @Test("a request that began before a reset does not start a refresh after it")
    func noRefreshAfterReset() async throws {
        let mock = MockTransport()
        let resetDone = Latch()
        let auth = TokenAuthMiddleware(hosts: ["api.example.com"], token: BearerToken(accessToken: "old")) { _ in BearerToken(accessToken: "relogin") }
        // The server answers 401 only after the chain was reset meanwhile.
        mock.enqueue { request throws(CatenaError) in
            await resetDone.wait()
            return APIResponse(status: .unauthorized, request: request)
        }
        let chain = auth --> mock
        let call = Task { try await chain.load(try APIRequest(.get, urlString: "https://api.example.com/me")) }
        while mock.requests.isEmpty { try await Task.sleep(for: .milliseconds(5)) }
        await chain.reset()
        resetDone.open()
        let result = await call.result
        if case .failure(let error as CatenaError) = result { #expect(error.code == .cancelled) } else { Issue.record("the request went on: \(result)") }
        #expect(auth.refreshCount == 0, "no refresh started after the reset")
        #expect(auth.currentToken == nil)
    }

    @Test("a caller that cancels while waiting for a refresh ends at once; the refresh goes on for the others")
    func cancelledWaiter() async throws {
        let latch = Latch()
        let mock = MockTransport()
        mock.respond()
        let auth = TokenAuthMiddleware(hosts: ["api.example.com"]) { _ in
            await latch.wait()
            return BearerToken(accessToken: "fresh")
        }
        let chain = auth --> mock
        let request = try APIRequest(.get, urlString: "https://api.example.com/me")
        let impatient = Task { try await chain.load(request) }
        let patient = Task { try await chain.load(request) }
        while latch.entered == 0 { try await Task.sleep(for: .milliseconds(5)) }
        impatient.cancel()
        let ended = await finishes(within: .seconds(10)) { _ = await impatient.result }
        #expect(ended)
        latch.open()
        let response = try await patient.value
        #expect(response.status == .ok)
        #expect(mock.requests.first?.headerFields[.authorization] == "Bearer fresh")
        #expect(auth.refreshCount == 1)
    }

    @Test("a token that lives shorter than the leeway refreshes once, not on every request")
    func shortLivedToken() async throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let mock = MockTransport()
        for _ in 0..<5 { mock.respond() }
        let auth = TokenAuthMiddleware(hosts: ["api.example.com"], leeway: .seconds(30), clock: FixedClock(date: now)) { _ in
            BearerToken(accessToken: "short", expiresAt: now.addingTimeInterval(10))
        }
        let chain = auth --> mock
        for _ in 0..<5 { _ = try await chain.load(try APIRequest(.get, urlString: "https://api.example.com/me")) }
        #expect(auth.refreshCount == 1)
    }

    @Test("an expired token is still refreshed, whatever its lifetime was")
    func expiredTokenRefreshes() async throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let mock = MockTransport()
        mock.respond()
        let auth = TokenAuthMiddleware(
            hosts: ["api.example.com"], token: BearerToken(accessToken: "old", expiresAt: now.addingTimeInterval(-1)),
            clock: FixedClock(date: now)
        ) { _ in BearerToken(accessToken: "new") }
        _ = try await (auth --> mock).load(try APIRequest(.get, urlString: "https://api.example.com/me"))
        #expect(mock.requests.first?.headerFields[.authorization] == "Bearer new")
    }

    @Test(
        "credentials go to the configured origin only: scheme default port, named port, loopback http",
        arguments: [
            // (hosts entry, request URL, outcome): sent, passed on without them, or refused
            ("api.example.com", "https://api.example.com/me", "sent"),
            ("api.example.com", "https://api.example.com:443/me", "sent"),
            ("api.example.com", "https://api.example.com:8443/me", "refused"),
            ("API.Example.com", "https://api.EXAMPLE.com/me", "sent"),
            ("api.example.com", "https://evil.example.com/me", "passed"),
            ("api.example.com:8443", "https://api.example.com:8443/me", "sent"),
            ("api.example.com:8443", "https://api.example.com/me", "refused"),
            ("127.0.0.1:8080", "http://127.0.0.1:8080/me", "sent"),
            ("127.0.0.1:8080", "http://127.0.0.1:9090/me", "refused"),
            ("127.0.0.1", "http://127.0.0.1/me", "sent"),
            ("localhost:8080", "http://localhost:8080/me", "sent"),
            ("[::1]:8080", "http://[::1]:8080/me", "sent"),
            ("::1", "http://[::1]/me", "sent"),
            ("api.example.com:0", "https://api.example.com/me", "passed"),
            ("api.example.com:http", "https://api.example.com/me", "passed"),
            (":443", "https://api.example.com/me", "passed"),
        ])
    func origins(entry: String, url: String, outcome: String) async throws {
        let mock = MockTransport()
        mock.respond()
        mock.respond()
        let token = TokenAuthMiddleware(hosts: [entry], token: BearerToken(accessToken: "t")) { _ in BearerToken(accessToken: "t") } --> mock
        let basic = BasicAuthMiddleware(hosts: [entry], credentials: BasicCredentials(user: "u", password: "p")) --> mock
        for chain in [token, basic] as [any HTTPLoader] {
            do {
                _ = try await chain.load(try APIRequest(.get, urlString: url))
                #expect(outcome != "refused")
            } catch {
                #expect(outcome == "refused", "\(error)")
                #expect(error.detail?.contains("on port") == true)
            }
        }
        let sent = mock.requests.map { $0.headerFields[.authorization] != nil }
        switch outcome {
        case "sent": #expect(sent == [true, true])
        case "passed": #expect(sent == [false, false])
        default: #expect(sent.isEmpty)
        }
    }

    @Test("credentials never go over plain http to a host that is not loopback, unless allowed")
    func refusesPlainHTTP() async throws {
        let mock = MockTransport()
        let token =
            TokenAuthMiddleware(hosts: ["api.example.com"], token: BearerToken(accessToken: "secret-token")) { _ in BearerToken(accessToken: "t") } --> mock
        let basic = BasicAuthMiddleware(hosts: ["api.example.com"], credentials: BasicCredentials(user: "u", password: "secret-password")) --> mock
        for chain in [token, basic] as [any HTTPLoader] {
            let error = await #expect(throws: CatenaError.self) { try await chain.load(try APIRequest(.get, urlString: "http://api.example.com/me")) }
            #expect(error?.code == .invalidRequest)
            #expect(error?.detail?.contains("over plain http") == true)
            #expect(error.map { "\($0)" }?.contains("secret") == false)
        }
        #expect(mock.requests.isEmpty)

        mock.respond()
        let allowed =
            TokenAuthMiddleware(hosts: ["api.example.com"], allowHTTP: true, token: BearerToken(accessToken: "t")) { _ in BearerToken(accessToken: "t") }
            --> mock
        _ = try await allowed.load(try APIRequest(.get, urlString: "http://api.example.com/me"))
        #expect(mock.requests.first?.headerFields[.authorization] == "Bearer t")
    }

    @Test("random origins never receive credentials unless host, port and scheme all match")
    func randomOrigins() async throws {
        var generator = SystemRandomNumberGenerator()
        let hosts = ["api.example.com", "example.com", "127.0.0.1", "localhost", "10.0.0.1", "::1"]
        for _ in 0..<300 {
            let host = hosts.randomElement(using: &generator)!
            let port: Int? = Bool.random(using: &generator) ? nil : [80, 443, 8080, 8443].randomElement(using: &generator)
            let scheme = Bool.random(using: &generator) ? "http" : "https"
            let entryHost = hosts.randomElement(using: &generator)!
            let entryPort: Int? = Bool.random(using: &generator) ? nil : [80, 443, 8080, 8443].randomElement(using: &generator)
            let bracket = { (h: String) in h.contains(":") ? "[\(h)]" : h }
            let entry = entryPort.map { "\(bracket(entryHost)):\($0)" } ?? entryHost
            let url = "\(scheme)://\(bracket(host))\(port.map { ":\($0)" } ?? "")/x"

            let defaultPort = scheme == "https" ? 443 : 80
            let sameHost = host == entryHost
            let matches = sameHost && (port ?? defaultPort) == (entryPort ?? defaultPort)
            let loopback = ["127.0.0.1", "localhost", "::1"].contains(host)
            let mock = MockTransport()
            mock.respond()
            let chain = TokenAuthMiddleware(hosts: [entry], token: BearerToken(accessToken: "t")) { _ in BearerToken(accessToken: "t") } --> mock
            let result: Result<APIResponse, CatenaError>
            do { result = .success(try await chain.load(try APIRequest(.get, urlString: url))) } catch { result = .failure(error) }
            switch result {
            case .success:
                #expect((mock.requests.first?.headerFields[.authorization] != nil) == matches, "\(entry) \(url)")
            case .failure(let error):
                #expect((sameHost && !matches) || (matches && scheme == "http" && !loopback), "\(entry) \(url): \(error)")
                #expect(mock.requests.isEmpty)
            }
        }
    }
}
