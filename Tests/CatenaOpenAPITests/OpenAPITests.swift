import Catena
import CatenaAsyncHTTPClient
import CatenaOpenAPI
import DemoUsersOpenAPI
import Foundation
import HTTPTypes
import OpenAPIRuntime
import Testing
@testable import CatenaTestSupport

@Suite("OpenAPI bridge")
struct OpenAPITests {
    struct Grants: Decodable { let clientCredentials: Int }

    func grants(_ client: String) async throws -> Grants {
        let base = try await TestServer.running().baseURL
        let url = base.appending(path: "oauth/stats").appending(queryItems: [URLQueryItem(name: "client", value: client)])
        return try await AsyncHTTPClientTransport.forTests().load(APIRequest(url: url)).decode(Grants.self)
    }

    /// The demo server's service client, under a client id of this test's own.
    func oauth(_ kind: TransportKind, client: String) async throws -> OAuth2Client {
        let base = try await TestServer.running().baseURL
        return OAuth2Client(
            clientID: client, authentication: .clientSecretBasic("catena-service-secret"), endpoints: .init(token: base.appending(path: "oauth/token")),
            loader: kind.make())
    }

    @Test(
        "a generated client through RetryMiddleware --> TokenAuthMiddleware --> CacheMiddleware: the server counts the retries, the refresh and the cache's work",
        arguments: TransportKind.allCases)
    func generatedClientThroughChain(kind: TransportKind) async throws {
        let server = try await TestServer.running()
        let clock = VirtualClock()
        let id = "catena-service.t\(UUID().uuidString.prefix(8).lowercased())"
        let auth = TokenAuthMiddleware(hosts: [try await TestServer.authority()], client: try await oauth(kind, client: id), signIn: .clientCredentials())
        let chain = RetryMiddleware(RetryStrategy(jitter: false), clock: clock) --> auth --> CacheMiddleware() --> kind.make()
        let client = Client(serverURL: server.baseURL, transport: CatenaClientTransport(chain))
        let key = UUID().uuidString

        // RetryMiddleware: the server saw three calls, the client one answer.
        let flaky = try await client.getFlaky(query: .init(key: key, failures: 2)).ok.body.json
        #expect(flaky.call == 3)
        #expect(clock.waits.count == 2)

        // TokenAuthMiddleware: logged in for the first call; refreshes an expired token; the server
        // counts the grants.
        #expect(try await client.getMe().ok.body.json.email == id)
        let token = try #require(auth.currentToken)
        let base = server.baseURL
        _ = try await AsyncHTTPClientTransport.forTests().load(
            APIRequest(
                .post, url: base.appending(path: "oauth/expire"),
                body: .form([(name: "token", value: token.accessToken)])))
        #expect(try await client.getMe().ok.body.json.email == id)
        #expect(try await grants(id).clientCredentials == 2)
        #expect(auth.refreshCount == 2)

        // CacheMiddleware: the second call is answered from the cache; the server gave one full
        // answer. (`public`: the calls carry a token, and the cache keeps an answer to
        // credentials only when the server says it may.)
        let first = try await client.getCached(path: .init(key: key), query: .init(maxAge: 60, _public: ._1)).ok.body.json
        let second = try await client.getCached(path: .init(key: key), query: .init(maxAge: 60, _public: ._1)).ok.body.json
        #expect(first.key == key && second.key == key)
        let stats = try await client.getCacheStats(path: .init(key: key)).ok.body.json
        #expect(stats.full == 1)
        #expect(stats.notModified == 0)

        // Statuses are the generated client's cases; bodies go both ways.
        guard case .notFound = try await client.getUser(path: .init(id: 99)) else {
            Issue.record("expected 404 as .notFound")
            return
        }
        let created = try await client.createUser(body: .json(.init(name: "morpheus", job: "leader"))).created.body.json
        #expect(created.name == "morpheus")
        #expect(created.job == "leader")
        let page = try await client.listUsers(query: .init(page: 2, perPage: 6)).ok.body.json
        #expect(page.page == 2)
        #expect(page.data.map(\.id) == Array(7...12))
    }

    @Test("a failure reaches the generated client's caller with its Catena code", arguments: TransportKind.allCases)
    func errorCodes(kind: TransportKind) async throws {
        let port = try await TestServer.closedPort()
        let client = Client(serverURL: URL(string: "http://127.0.0.1:\(port)")!, transport: CatenaClientTransport(kind.make(timeout: .seconds(5))))
        do {
            _ = try await client.listUsers()
            Issue.record("expected a failure")
        } catch {
            #expect(error is ClientError, "the generated client wraps transport errors")
            #expect(error.catenaError?.code == .cannotConnect)
            #expect(error.catenaError?.request.port == port)
        }
    }

    @Test("streamed operations stream their responses; the rest load whole", arguments: TransportKind.allCases)
    func streamed(kind: TransportKind) async throws {
        let server = try await TestServer.running()
        let seen = Locked<[String]>([])
        let chain = OperationRecorder(seen: seen) --> kind.make()
        let client = Client(serverURL: server.baseURL, transport: CatenaClientTransport(chain, streamedOperations: ["listUsers"]))
        let page = try await client.listUsers(query: .init(page: 1, perPage: 3)).ok.body.json
        #expect(page.data.count == 3)
        _ = try await client.getUser(path: .init(id: 2)).ok.body.json
        #expect(seen.withLock { $0 } == ["stream listUsers", "load getUser"])
    }

    @Test(
        "a ClientMiddleware runs in a Catena chain: it changes the request and the response, and the body it passes on can be sent again",
        arguments: TransportKind.allCases)
    func clientMiddlewareInChain(kind: TransportKind) async throws {
        let operations = Locked<[String]>([])
        let clock = VirtualClock()
        let chain =
            EnvironmentMiddleware(try await TestServer.environment())
            --> RetryMiddleware(RetryStrategy(jitter: false), clock: clock)
            --> OpenAPIMiddleware(HeaderStamp(operations: operations))
            --> kind.make()
        let echo = try await chain.load(try APIRequest(.post, path: ["api", "echo"], body: .text("hello"))).decode(Echo.self)
        #expect(echo.header("x-stamped") == "yes")
        #expect(echo.body == "hello")
        let response = try await chain.load(
            try APIRequest(
                .put, path: ["api", "flaky"],
                query: [
                    URLQueryItem(name: "key", value: uniqueKey()), URLQueryItem(name: "failures", value: "1"),
                ], body: .text("again")))
        #expect(response.status == .ok)
        #expect(response.headerFields[HTTPField.Name("X-Seen-By")!] == "HeaderStamp", "the middleware's change to the response")
        #expect(operations.withLock { $0 }.count == 3, "one call, then one for each attempt")
    }

    @Test("a ClientMiddleware that replaces the body, and one that throws", arguments: TransportKind.allCases)
    func clientMiddlewareBodiesAndFailures(kind: TransportKind) async throws {
        let environment = try await TestServer.environment()
        let upper = EnvironmentMiddleware(environment) --> OpenAPIMiddleware(Uppercase()) --> kind.make()
        let echo = try await upper.load(try APIRequest(.post, path: ["api", "echo"], body: .text("quiet"))).decode(Echo.self)
        #expect(echo.body == "QUIET")

        let failing = EnvironmentMiddleware(environment) --> OpenAPIMiddleware(Refusing()) --> kind.make()
        let error = await #expect(throws: CatenaError.self) { try await failing.load(try APIRequest(.get, path: ["api", "echo"])) }
        #expect(error?.code == .unknown)
        #expect(error?.detail?.contains("Refusing") == true)

        let relative = OpenAPIMiddleware(Uppercase()) --> kind.make()
        let relativeError = await #expect(throws: CatenaError.self) { try await relative.load(try APIRequest(.get, path: ["api", "echo"])) }
        #expect(relativeError?.code == .invalidRequest)
    }
}

/// Notes whether each request was loaded or streamed, with its operation ID.
private struct OperationRecorder: HTTPMiddleware {
    let seen: Locked<[String]>
    func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        seen.withLock { $0.append("load \(request[option: OpenAPIOperationID.self] ?? "?")") }
        return try await next.load(request)
    }
    func stream(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> StreamedResponse {
        seen.withLock { $0.append("stream \(request[option: OpenAPIOperationID.self] ?? "?")") }
        return try await next.stream(request)
    }
}

/// Adds a request header and a response header; passes the body on unchanged.
private struct HeaderStamp: ClientMiddleware {
    let operations: Locked<[String]>
    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        operations.withLock { $0.append(operationID) }
        var request = request
        request.headerFields[HTTPField.Name("X-Stamped")!] = "yes"
        var (response, responseBody) = try await next(request, body, baseURL)
        response.headerFields[HTTPField.Name("X-Seen-By")!] = "HeaderStamp"
        return (response, responseBody)
    }
}

/// Replaces the body with its upper-cased text.
private struct Uppercase: ClientMiddleware {
    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        guard let body else { return try await next(request, nil, baseURL) }
        let text = try await String(collecting: body, upTo: 1 << 16)
        return try await next(request, HTTPBody(text.uppercased()), baseURL)
    }
}

private struct Refusing: ClientMiddleware {
    struct Refused: Error {}
    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        throw Refused()
    }
}
