import Catena
import CatenaTesting
import Foundation
import HTTPTypes
import Logging
import Testing
@testable import CatenaTestSupport

/// Appends its name to a shared trace on the way in, on the way out and on reset.
struct Tracer: HTTPMiddleware {
    let name: String
    let trace: Trace

    func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        trace.append("\(name)>")
        var request = request
        request.headerFields.append(HTTPField(name: HTTPField.Name("X-Trace")!, value: name))
        defer { trace.append("<\(name)") }
        return try await next.load(request)
    }

    func reset() async { trace.append("reset \(name)") }
}

final class Trace: Sendable {
    private let events = Locked<[String]>([])
    func append(_ event: String) { events.withLock { $0.append(event) } }
    var all: [String] { events.withLock { $0 } }
}

@Suite("Loader chain")
struct ChainTests {
    @Test("a --> b --> c runs a, then b, then c, and the value of the expression is the head")
    func chainOrder() async throws {
        let trace = Trace()
        let mock = MockTransport()
        mock.respond(status: .ok)
        let chain = Tracer(name: "a", trace: trace) --> Tracer(name: "b", trace: trace) --> Tracer(name: "c", trace: trace) --> mock
        #expect(chain.middleware.name == "a")
        _ = try await chain.load(try APIRequest(.get, urlString: "http://example.com/"))
        #expect(trace.all == ["a>", "b>", "c>", "<c", "<b", "<a"])
        #expect(mock.requests.first?.headerFields[values: HTTPField.Name("X-Trace")!] == ["a", "b", "c"])
    }

    @Test("reset() travels down the chain, top to bottom, to the transport")
    func resetTravelsDown() async {
        let trace = Trace()
        let mock = MockTransport()
        let chain = Tracer(name: "a", trace: trace) --> Tracer(name: "b", trace: trace) --> mock
        await chain.reset()
        #expect(trace.all == ["reset a", "reset b"])
        #expect(mock.resetCount == 1)
    }

    @Test("a chain can be type-erased and still be extended")
    func erasedChain() async throws {
        let trace = Trace()
        let mock = MockTransport()
        mock.respond(status: .accepted)
        let erased: any HTTPLoader = Tracer(name: "inner", trace: trace) --> mock
        let chain = Tracer(name: "outer", trace: trace) --> erased
        let response = try await chain.load(try APIRequest(.get, urlString: "http://example.com/"))
        #expect(response.status == .accepted)
        #expect(trace.all == ["outer>", "inner>", "<inner", "<outer"])
        await chain.reset()
        #expect(mock.resetCount == 1)
    }

    @Test("RequestModifierMiddleware changes the request; its error fails the request before it is sent")
    func modifyRequest() async throws {
        let mock = MockTransport()
        mock.respond(status: .ok)
        let chain = RequestModifierMiddleware { $0.headerFields[.userAgent] = "Catena-Test" } --> mock
        _ = try await chain.load(try APIRequest(.get, urlString: "http://example.com/"))
        #expect(mock.requests.first?.headerFields[.userAgent] == "Catena-Test")

        struct SigningFailed: Error {}
        let failing = RequestModifierMiddleware { _ in throw SigningFailed() } --> mock
        let error = await #expect(throws: CatenaError.self) {
            try await failing.load(try APIRequest(.get, urlString: "http://example.com/"))
        }
        #expect(error?.code == .invalidRequest)
        #expect(error?.underlyingError is SigningFailed)
        #expect(mock.requests.count == 1)
    }

    @Test("the mock answers in order, records requests, and says clearly when it has no handler left")
    func mockTransport() async throws {
        let mock = MockTransport()
        mock.respond(status: .ok, json: #"{"n": 1}"#)
        mock.fail(.cannotConnect, detail: "simulated")
        let request = try APIRequest(.get, urlString: "http://example.com/a")
        #expect(try await mock.load(request).status == .ok)
        let second = await #expect(throws: CatenaError.self) { try await mock.load(request) }
        #expect(second?.code == .cannotConnect)
        let third = await #expect(throws: CatenaError.self) { try await mock.load(request) }
        #expect(third?.detail?.contains("no handler left for request #3") == true)
        #expect(mock.requests.count == 3)
    }

    @Test("mock routes answer by method and path pattern, every time, before the queue")
    func mockRoutes() async throws {
        let mock = MockTransport()
        mock.on(.get, "/api/users/*", json: #"{"id": 1}"#)
        mock.on(nil, "/files/**", status: .noContent)
        mock.on(.delete, "/api/users/2") { request throws(CatenaError) in
            APIResponse(status: .accepted, body: Data(), request: request)
        }
        mock.respond(status: .init(code: 418))
        func status(_ method: HTTPRequest.Method, _ path: String) async -> Int? {
            try? await mock.load(try APIRequest(method, urlString: "http://example.com" + path)).status.code
        }
        #expect(await status(.get, "/api/users/1") == 200)
        #expect(await status(.get, "/api/users/2") == 200, "a route answers every time")
        #expect(await status(.delete, "/api/users/2") == 202)
        #expect(await status(.put, "/files") == 204, "** matches no segment too")
        #expect(await status(.post, "/files/a/b%2Fc") == 204)
        #expect(await status(.get, "/api/users/1/photos") == 418, "* is one segment: the queue answers")
        let error = await #expect(throws: CatenaError.self) { try await mock.load(try APIRequest(.get, urlString: "http://example.com/api")) }
        #expect(error?.detail?.contains("no route for GET /api") == true)
        #expect(mock.requests.count == 7)
    }
}

@Suite("Server environment")
struct EnvironmentTests {
    let environment = ServerEnvironment(
        scheme: "http", host: "127.0.0.1", port: 8080, pathPrefix: "/v2",
        headerFields: [HTTPField.Name("X-Api-Key")!: "k3y"], queryItems: [URLQueryItem(name: "lang", value: "en")])

    func send(_ request: APIRequest) async throws -> APIRequest {
        let mock = MockTransport()
        mock.respond(status: .ok)
        _ = try await (EnvironmentMiddleware(environment) --> mock).load(request)
        return try #require(mock.requests.first)
    }

    @Test("a relative request gets scheme, host, port, prefix, headers and query items")
    func relativeRequest() async throws {
        let sent = try await send(try APIRequest(.get, path: ["users"], query: [URLQueryItem(name: "page", value: "2")]))
        #expect(try sent.urlString() == "http://127.0.0.1:8080/v2/users?page=2&lang=en")
        #expect(sent.headerFields[HTTPField.Name("X-Api-Key")!] == "k3y")
    }

    @Test("the request's own header and query values win over the environment's defaults")
    func requestValuesWin() async throws {
        let request = try APIRequest(
            .get, path: ["users"], query: [URLQueryItem(name: "lang", value: "de")],
            headerFields: [HTTPField.Name("X-Api-Key")!: "mine"])
        let sent = try await send(request)
        #expect(try sent.urlString() == "http://127.0.0.1:8080/v2/users?lang=de")
        #expect(sent.headerFields[values: HTTPField.Name("X-Api-Key")!] == ["mine"])
    }

    @Test("a request to another host is left alone: the API key never leaks")
    func otherHostUntouched() async throws {
        let sent = try await send(try APIRequest(.get, urlString: "https://cdn.example.com/img/1.jpg"))
        #expect(try sent.urlString() == "https://cdn.example.com/img/1.jpg")
        #expect(sent.headerFields[HTTPField.Name("X-Api-Key")!] == nil)
    }

    @Test("an absolute request to the same server gets headers and query items but keeps its path")
    func sameServerAbsolute() async throws {
        let sent = try await send(try APIRequest(.get, urlString: "http://127.0.0.1:8080/api/users?page=2"))
        #expect(try sent.urlString() == "http://127.0.0.1:8080/api/users?page=2&lang=en")
        #expect(sent.headerFields[HTTPField.Name("X-Api-Key")!] == "k3y")
    }

    @Test("a per-request environment option overrides the chain's")
    func optionOverrides() async throws {
        var request = try APIRequest(.get, path: ["users"])
        request[option: ServerEnvironment.self] = ServerEnvironment(host: "staging.example.com")
        let sent = try await send(request)
        #expect(try sent.urlString() == "https://staging.example.com/users")
        #expect(sent.headerFields[HTTPField.Name("X-Api-Key")!] == nil)
    }

    @Test("a base URL becomes an environment; a URL without host or with another scheme does not")
    func fromBaseURL() throws {
        let parsed = try #require(ServerEnvironment(baseURL: URL(string: "http://localhost:9000/api/")!))
        #expect(parsed.host == "localhost")
        #expect(parsed.port == 9000)
        #expect(parsed.pathPrefix == "/api/")
        #expect(ServerEnvironment(baseURL: URL(string: "ftp://localhost/")!) == nil)
        #expect(ServerEnvironment(baseURL: URL(string: "/relative")!) == nil)
    }
    @Test("a base URL's user info becomes Basic auth and its query items are kept, not silently dropped")
    func baseURLKeepsEverything() async throws {
        let environment = try #require(
            ServerEnvironment(
                baseURL: URL(string: "https://ann:s3cret@api.example.com/v1?api_key=k3y&lang=en")!,
                queryItems: [URLQueryItem(name: "lang", value: "fr")]))
        #expect(environment.headerFields[.authorization] == BasicCredentials(user: "ann", password: "s3cret").headerValue)
        #expect(environment.queryItems == [URLQueryItem(name: "api_key", value: "k3y"), URLQueryItem(name: "lang", value: "fr")])
        let mock = MockTransport()
        mock.respond()
        _ = try await (EnvironmentMiddleware(environment) --> mock).load(try APIRequest(.get, path: ["users"]))
        #expect(try mock.requests.first?.urlString() == "https://api.example.com/v1/users?api_key=k3y&lang=fr")
        #expect(mock.requests.first?.headerFields[.authorization] != nil)
        // A password in clear text to a host that is not loopback, or user info that
        // is not valid percent-encoding, is no environment at all.
        #expect(ServerEnvironment(baseURL: URL(string: "http://ann:s3cret@api.example.com/")!) == nil)
        #expect(ServerEnvironment(baseURL: URL(string: "http://ann:s3cret@127.0.0.1:8080/")!) != nil)
    }

    @Test("what the environment injects is redacted in error descriptions and logs")
    func injectedValuesAreRedacted() async throws {
        let environment = ServerEnvironment(
            host: "api.example.com", headerFields: [HTTPField.Name("X-Tenant-Secret")!: "tenant-value"],
            queryItems: [URLQueryItem(name: "appid", value: "appid-value")])
        let logs = CapturedLogs()
        let mock = MockTransport()
        mock.fail(.timedOut)
        let chain = EnvironmentMiddleware(environment) --> LogMiddleware(logger: logs.logger(level: .debug)) --> mock
        let error = await #expect(throws: CatenaError.self) { try await chain.load(try APIRequest(.get, path: ["users"])) }
        let described = error.map { "\($0)" } ?? ""
        #expect(described.contains("appid=<redacted>"), "\(described)")
        for text in [described, logs.text] {
            #expect(!text.contains("appid-value") && !text.contains("tenant-value"), "\(text)")
        }
        #expect(logs.text.contains("X-Tenant-Secret: <redacted>"))
    }
}

@Suite("Log loader")
struct LogTests {
    @Test("credentials in headers and secret query items are redacted; the rest is logged")
    func redactsSecrets() async throws {
        let logs = CapturedLogs()
        let mock = MockTransport()
        mock.respond(status: .ok, headerFields: [.setCookie: "session=abc123", .contentType: "text/plain"], body: Data("ok".utf8))
        let chain =
            LogMiddleware(logger: logs.logger(level: .debug), redaction: .adding(headers: [HTTPField.Name("X-Api-Key")!], queryItems: ["session"]))
            --> mock
        let request = try APIRequest(
            .get, urlString: "https://example.com/data?session=s1&page=2&access_token=t0k3nvalue",
            headerFields: [
                .authorization: "Bearer very-secret", .cookie: "id=cookie-secret",
                HTTPField.Name("X-Api-Key")!: "key-secret", .accept: "application/json",
            ])
        _ = try await chain.load(request)
        let text = logs.text
        for secret in ["very-secret", "cookie-secret", "key-secret", "s1", "t0k3nvalue", "abc123"] {
            #expect(!text.contains(secret), "log leaked \(secret): \(text)")
        }
        #expect(text.contains("GET https://example.com/data?session=<redacted>&page=2&access_token=<redacted>"))
        #expect(text.contains("Accept: application/json"))
        #expect(text.contains("← 200"))
        #expect(text.contains("2 bytes"))
    }

    @Test("a request's own redaction never hides less than the default")
    func redactionNeverLess() async throws {
        let logs = CapturedLogs()
        let mock = MockTransport()
        mock.fail(.timedOut)
        var request = try APIRequest(
            .get, urlString: "https://example.com/data?access_token=t0k3n&session=s3ss",
            headerFields: [.authorization: "Bearer very-secret"])
        request[option: Redaction.self] = Redaction(headerNames: [], queryNames: ["session"])
        let error = await #expect(throws: CatenaError.self) { try await (LogMiddleware(logger: logs.logger(level: .debug)) --> mock).load(request) }
        for text in [error.map { "\($0)" } ?? "", logs.text, request.description] {
            for secret in ["t0k3n", "s3ss", "very-secret"] { #expect(!text.contains(secret), "\(text)") }
        }
    }

    @Test("a custom redaction also hides values in the description of an error from below, logging on or off")
    func customRedactionReachesErrors() async throws {
        for level in [Logger.Level.debug, .critical] {
            let mock = MockTransport()
            mock.fail(.timedOut)
            let chain = LogMiddleware(logger: CapturedLogs().logger(level: level), redaction: .adding(queryItems: ["session"])) --> mock
            let error = await #expect(throws: CatenaError.self) {
                try await chain.load(try APIRequest(.get, urlString: "https://example.com/data?session=s3ssion&page=2"))
            }
            let described = error.map { "\($0)" } ?? ""
            #expect(!described.contains("s3ssion") && described.contains("session=<redacted>&page=2"), "\(described)")
        }
    }

    @Test("below the logger's level nothing is logged; a failure logs one level higher")
    func levels() async throws {
        let quiet = CapturedLogs()
        let mock = MockTransport()
        mock.respond(status: .ok)
        _ = try await (LogMiddleware(logger: quiet.logger(level: .info)) --> mock).load(try APIRequest(.get, urlString: "http://example.com/"))
        #expect(quiet.all.isEmpty)

        let loud = CapturedLogs()
        mock.fail(.timedOut)
        _ = await #expect(throws: CatenaError.self) {
            try await (LogMiddleware(logger: loud.logger(level: .debug)) --> mock).load(try APIRequest(.get, urlString: "http://example.com/"))
        }
        #expect(loud.all.map(\.level) == [.debug, .info])
        #expect(loud.all.last?.text.contains("timed out") == true)
    }
}
