import Catena
import CatenaAsyncHTTPClient
import CatenaDemoServer
import Foundation
import HTTPTypes
import Testing
@testable import CatenaTestSupport

@Suite("Redirects and timeouts, the same on every transport", .serialized)
struct RedirectTimeoutTests {
    /// A request to the misbehaving server's `/redirect` that sends the caller to `target`.
    static func redirect(
        _ status: Int, to target: String, method: HTTPRequest.Method = .get,
        body: APIRequest.Body = .empty
    ) async throws -> APIRequest {
        let server = try await FaultServer.running()
        var components = URLComponents(url: server.url(.redirect), resolvingAgainstBaseURL: false)!
        components.queryItems = [URLQueryItem(name: "status", value: "\(status)"), URLQueryItem(name: "to", value: target)]
        return APIRequest(method, url: components.url!, body: body)
    }

    /// Runs `body` with a transport of `kind` whose AsyncHTTPClient pool is its own. The
    /// tests' shared pool also carries the misbehaving suites' connections, which their
    /// faults can leave broken (stray bytes after a 204, a close under a new request): a
    /// GET drawing one is sent again, a POST rightly is not, and fails. CI saw it once
    /// (11-26: "I/O on closed channel" on the 303 test's POST).
    static func withOwnPool(_ kind: TransportKind, _ body: (any HTTPLoader) async throws -> Void) async throws {
        guard kind == .asyncHTTPClient else { return try await body(kind.make()) }
        try await AsyncHTTPClientTransport.withTransport(timeout: .seconds(30)) { try await body($0) }
    }

    static func echoURL(host: String = "127.0.0.1") async throws -> String {
        "http://\(host):\(try await TestServer.running().port)/api/echo"
    }

    @Test(
        "307 and 308 keep the method and the body, also a file body and with upload progress watched",
        arguments: TransportKind.allCases, [307, 308])
    func keepBody(kind: TransportKind, status: Int) async throws {
        try await Self.withOwnPool(kind) { transport in try await keepBody(kind: kind, status: status, transport: transport) }
    }

    func keepBody(kind: TransportKind, status: Int, transport: any HTTPLoader) async throws {
        let payload = patternData(200_000)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("catena-redirect-\(UUID().uuidString)")
        try payload.write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        for body in [APIRequest.Body.data(payload), .file(file)] {
            for watched in [false, true] {
                var request = try await Self.redirect(status, to: try await Self.echoURL(), method: .post, body: body)
                if watched { request[option: UploadProgress.self] = { _ in } }
                let response = try await transport.load(request)
                #expect(response.status == .ok, "\(kind) \(status) \(body.kind) watched: \(watched)")
                let echo = try response.decode(Echo.self)
                #expect(echo.method == "POST")
                #expect(echo.bodyLength == payload.count, "\(kind) \(status) \(body.kind) watched: \(watched)")
            }
        }
    }

    @Test("303 turns a POST into a GET without a body; 302 does the same for a POST", arguments: TransportKind.allCases, [302, 303])
    func becomesGET(kind: TransportKind, status: Int) async throws {
        let request = try await Self.redirect(status, to: try await Self.echoURL(), method: .post, body: .json(["name": "neo"]))
        try await Self.withOwnPool(kind) { transport in
            let echo = try await transport.load(request).decode(Echo.self)
            #expect(echo.method == "GET")
            #expect(echo.bodyLength == 0)
            #expect(echo.header("content-type") == nil)
        }
    }

    @Test("RedirectPolicy.never and .sameOrigin return the redirect (the loop is in the misbehaving suite)", arguments: TransportKind.allCases)
    func policy(kind: TransportKind) async throws {
        var request = try await Self.redirect(302, to: try await Self.echoURL())
        request[option: RedirectPolicy.self] = .never
        let response = try await kind.make().load(request)
        #expect(response.status == .found)
        #expect(response.headerFields[.location] == (try await Self.echoURL()))

        var sameOrigin = try await Self.redirect(302, to: try await Self.echoURL())
        sameOrigin[option: RedirectPolicy.self] = .sameOrigin(max: 5)
        #expect(try await kind.make().load(sameOrigin).status == .found)
    }

    @Test(
        "a call whose timeout is already spent fails with timedOut and sends nothing, whatever the redirect policy",
        arguments: TransportKind.allCases)
    func spentTimeout(kind: TransportKind) async throws {
        let transport = kind.make()
        for policy: RedirectPolicy in [.never, .follow(max: 5), .sameOrigin(max: 5)] {
            for streamed in [false, true] {
                // The body is produced only for an attempt that goes out.
                let produced = Locked(0)
                var request = APIRequest(
                    .post, url: URL(string: try await Self.echoURL())!,
                    body: APIRequest.Body(kind: "counted", contentType: "text/plain") {
                        produced.withLock { $0 += 1 }
                        return Data("x".utf8)
                    })
                request.timeout = .zero
                request[option: RedirectPolicy.self] = policy
                do {
                    if streamed { _ = try await transport.stream(request) } else { _ = try await transport.load(request) }
                    Issue.record("\(kind) \(policy) streamed: \(streamed): a call with no time left was answered")
                } catch {
                    #expect(error.code == .timedOut, "\(kind) \(policy) streamed: \(streamed): \(error)")
                }
                #expect(produced.withLock { $0 } == 0, "\(kind) \(policy) streamed: \(streamed): the body was made for a send")
            }
        }
    }

    enum Source: String, CaseIterable, Sendable { case environment, authorization, cookie, apiKeyHeader }
    enum Destination: String, CaseIterable, Sendable { case sameOrigin, otherPort, otherHost }

    @Test(
        "credentials and the environment's headers never follow a redirect to another origin",
        arguments: TransportKind.allCases, Destination.allCases)
    func credentialsStayHome(kind: TransportKind, destination: Destination) async throws {
        let demo = try await TestServer.running()
        let fault = try await FaultServer.running()
        for source in Source.allCases {
            let secret = "s3cret-\(source.rawValue)"
            let request: APIRequest
            let base: URL
            switch destination {
            case .sameOrigin:
                base = demo.baseURL
                request = try APIRequest(.get, path: ["api", "redirect"], query: [URLQueryItem(name: "to", value: "/api/echo")])
            case .otherPort, .otherHost:
                base = fault.baseURL
                let target = try await Self.echoURL(host: destination == .otherHost ? "localhost" : "127.0.0.1")
                request = try APIRequest(
                    .get, path: ["redirect"],
                    query: [
                        URLQueryItem(name: "status", value: "307"),
                        URLQueryItem(name: "to", value: target),
                    ])
            }
            var fields = HTTPFields()
            var environmentFields = HTTPFields()
            switch source {
            case .environment: environmentFields[HTTPField.Name("X-Tenant-Key")!] = secret
            case .authorization: fields[.authorization] = "Bearer \(secret)"
            case .cookie: fields[.cookie] = "session=\(secret)"
            case .apiKeyHeader: fields[HTTPField.Name("X-Api-Key")!] = secret
            }
            var sent = request
            sent.headerFields.append(contentsOf: fields)
            let environment = try #require(ServerEnvironment(baseURL: base, headerFields: environmentFields))
            let chain = EnvironmentMiddleware(environment) --> kind.make()
            let echo = try await chain.load(sent).decode(Echo.self)
            let leaked = echo.headers.values.contains { $0.contains(secret) }
            #expect(leaked == (destination == .sameOrigin), "\(kind) \(source) \(destination)")
        }
    }

    @Test("a cross-origin or downgrading redirect strips secrets; a same-origin one keeps them")
    func strippingRules() throws {
        var request = try APIRequest(
            .post, urlString: "https://api.example.com/v1/upload",
            headerFields: [
                .authorization: "Bearer t", HTTPField.Name("X-Api-Key")!: "k",
                HTTPField.Name("X-Env")!: "e", .accept: "application/json",
            ],
            body: .text("x"))
        request[option: OriginBoundHeaders.self] = [HTTPField.Name("X-Env")!]
        func follow(_ status: Int, _ location: String) throws -> APIRequest? {
            let response = APIResponse(status: .init(code: status), headerFields: [.location: location], body: Data(), request: request)
            return try Redirects.nextRequest(after: response, from: request)
        }
        let same = try #require(try follow(307, "/v1/other"))
        #expect(same.headerFields[.authorization] == "Bearer t")
        #expect(same.method == .post)
        // A body is never resent over plain http: the 308 is the answer.
        #expect(try follow(308, "http://api.example.com/v1/upload") == nil)
        let seeOther = try #require(try follow(303, "http://api.example.com/v1/done"))
        #expect(seeOther.method == .get)
        #expect(seeOther.headerFields[.authorization] == nil)
        for location in ["https://api.example.com:8443/x", "https://evil.example.net/x"] {
            let next = try #require(try follow(308, location))
            #expect(next.headerFields[.authorization] == nil, "\(location)")
            #expect(next.headerFields[HTTPField.Name("X-Api-Key")!] == nil, "\(location)")
            #expect(next.headerFields[HTTPField.Name("X-Env")!] == nil, "\(location)")
            #expect(next.headerFields[.accept] == "application/json")
        }
        // User information in a Location never becomes credentials.
        #expect(try follow(301, "https://user:pw@api.example.com/y")?.headerFields[.authorization] == "Bearer t")
        #expect(throws: CatenaError.self) { try follow(302, "file:///etc/passwd") }
        #expect(try follow(302, "") == nil)
        #expect(try follow(200, "/elsewhere") == nil)
    }

    @Test(
        "the timeout is Catena's own, to the millisecond: 900 ms for a 100 ms answer, 1.9 s for a 1.1 s one",
        arguments: TransportKind.allCases)
    func subSecondTimeouts(kind: TransportKind) async throws {
        let chain = try await kind.chain()
        // A timeout cut to whole seconds (what corelibs URLSession does with its own) fails these every time; a loaded machine can make answers late for
        // seconds (three in a row were, beside a build and the bomb test), so each pair
        // gets six tries half a second apart and must succeed once.
        for (timeout, delay) in [(Duration.milliseconds(900), "0.1"), (.milliseconds(1900), "1.1")] {
            var request = try APIRequest(.get, path: ["api", "users", "2"], query: [URLQueryItem(name: "delay", value: delay)])
            request[option: RequestTimeout.self] = timeout
            var failures: [String] = []
            for _ in 0..<6 {
                do {
                    if try await chain.load(request).status == .ok { break }
                    failures.append("not 200")
                } catch {
                    failures.append("\(error)")
                }
                try await Task.sleep(for: .milliseconds(500))
            }
            #expect(failures.count < 6, "\(kind) \(timeout) for \(delay) s: \(failures)")
        }
        var late = try APIRequest(.get, path: ["api", "users", "2"], query: [URLQueryItem(name: "delay", value: "5")])
        late[option: RequestTimeout.self] = .milliseconds(1500)
        let start = ContinuousClock.now
        let error = await #expect(throws: CatenaError.self) { try await chain.load(late) }
        let elapsed = ContinuousClock.now - start
        #expect(error?.code == .timedOut)
        #expect(elapsed >= .milliseconds(1400) && elapsed < .seconds(3), "\(kind) fired after \(elapsed)")
    }

    @Test("cancelling calls while their redirects are pending never brings the process down", arguments: TransportKind.allCases)
    func cancelDuringRedirects(kind: TransportKind) async throws {
        let chain = try await kind.chain(timeout: .seconds(10))
        let request = try APIRequest(
            .get, path: ["api", "redirect"],
            query: [
                URLQueryItem(name: "to", value: "/api/redirect?to=/api/users/2")
            ])
        // Cancels spread from 0 to 40 times an uncancelled call's time (20 run at once),
        // in waves of 20, so they land before, between and after the redirects.
        // The pace is the fastest of three uncancelled calls, at most 50 ms: one slow first
        // call on a loaded machine once stretched the waves to five minutes.
        var fastest = Duration.milliseconds(50)
        for _ in 0..<3 {
            let start = ContinuousClock.now
            #expect(try await chain.load(request).status == .ok)
            fastest = min(fastest, ContinuousClock.now - start)
        }
        let typical = fastest
        var outcomes: [String?] = []
        for _ in 0..<10 {
            outcomes += await withTaskGroup(of: String?.self) { group in
                for index in 0..<20 {
                    group.addTask {
                        let call = Task { try await chain.load(request) }
                        try? await Task.sleep(for: typical * Double(index) * 2)
                        call.cancel()
                        switch await call.result {
                        case .success(let response): return response.status == .ok ? "ok" : nil
                        case .failure(let error): return (error as? CatenaError)?.code == .cancelled ? "cancelled" : nil
                        }
                    }
                }
                return await group.reduce(into: [String?]()) { $0.append($1) }
            }
        }
        #expect(outcomes.count == 200)
        #expect(outcomes.allSatisfy { $0 != nil }, "every call ended as a success or as cancelled")
        // Both kinds, so some cancels landed while the call was under way.
        #expect(outcomes.contains("ok") && outcomes.contains("cancelled"))
        #expect(try await chain.load(try APIRequest(.get, path: ["api", "users", "2"])).status == .ok)
    }
}
