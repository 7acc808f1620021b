import Catena
import CatenaAsyncHTTPClient
import CatenaDemoServer
import Foundation
import HTTPTypes
import ReqresAPI
import Testing
@testable import CatenaTestSupport

/// The demo server speaks reqres.in's shapes; these tests read them through Catena.
@Suite("Demo server: reqres users API")
struct DemoServerTests {
    let chain: any HTTPLoader

    init() async throws {
        chain = try await TransportKind.asyncHTTPClient.chain()
    }

    func object(_ response: APIResponse) throws -> [String: String] {
        let decoded = try JSONSerialization.jsonObject(with: response.body) as? [String: Any] ?? [:]
        return decoded.mapValues { "\($0)" }
    }

    @Test("the list has 12 users over 2 pages of 6, and per_page changes the paging")
    func listPaging() async throws {
        let first = try await chain.load(try ListUsersEndpoint().makeRequest()).validateStatus().decode(UserPage.self)
        #expect(first.page == 1)
        #expect(first.perPage == 6)
        #expect(first.total == 12)
        #expect(first.totalPages == 2)
        #expect(first.data.map(\.id) == Array(1...6))
        #expect(first.data.first?.email == "george.bluth@reqres.in")

        let second = try await chain.load(try ListUsersEndpoint(page: 2).makeRequest()).decode(UserPage.self)
        #expect(second.data.map(\.id) == Array(7...12))

        let small = try await chain.load(try ListUsersEndpoint(page: 3, perPage: 5).makeRequest()).decode(UserPage.self)
        #expect(small.totalPages == 3)
        #expect(small.data.map(\.id) == [11, 12])

        let beyond = try await chain.load(try ListUsersEndpoint(page: 9).makeRequest()).decode(UserPage.self)
        #expect(beyond.data.isEmpty)
    }

    @Test("the users chain: the list, then the first user on it")
    func usersChain() async throws {
        let list = try await chain.load(try ListUsersEndpoint().makeRequest()).validateStatus().decode(UserPage.self)
        let first = try #require(list.data.first)
        let user = try await chain.load(try UserEndpoint(id: first.id).makeRequest()).validateStatus().decode(SingleUser.self).data
        #expect(user == first)
        #expect(user.firstName == "George")
        #expect(user.lastName == "Bluth")
    }

    @Test("an unknown user is 404 with {} and fails validation naming the URL")
    func unknownUser() async throws {
        let response = try await chain.load(try UserEndpoint(id: 99).makeRequest())
        #expect(response.status == .notFound)
        #expect(String(decoding: response.body, as: UTF8.self) == "{}")
        let error = #expect(throws: CatenaError.self) { try response.validateStatus() }
        #expect(error?.code == .unacceptableStatus)
        #expect(error?.description.contains("GET http://127.0.0.1:") == true)
        #expect(error?.description.hasSuffix("/api/users/99: unacceptable status 404 Not Found") == true)
    }

    @Test("a body that is not JSON fails decoding with decodingFailed")
    func nonJSONBody() async throws {
        let response = try await chain.load(try APIRequest(.get, path: ["api", "bytes", "16"]))
        let error = #expect(throws: CatenaError.self) { try response.decode(UserPage.self) }
        #expect(error?.code == .decodingFailed)
        #expect(error?.detail?.contains("UserPage from 16 bytes") == true)
    }

    @Test("create answers 201 with what was sent, an id and createdAt")
    func create() async throws {
        let response = try await chain.load(try APIRequest(.post, path: ["api", "users"], body: .json(["name": "morpheus", "job": "leader"])))
        #expect(response.status == .created)
        let created = try object(response)
        #expect(created["name"] == "morpheus")
        #expect(created["job"] == "leader")
        #expect(created["id"] != nil)
        #expect(created["createdAt"] != nil)
    }

    @Test("PUT and PATCH answer 200 with updatedAt; an unknown id is 404")
    func update() async throws {
        for method: HTTPRequest.Method in [.put, .patch] {
            let response = try await chain.load(try APIRequest(method, path: ["api", "users", "2"], body: .json(["job": "zion resident"])))
            #expect(response.status == .ok)
            let updated = try object(response)
            #expect(updated["job"] == "zion resident")
            #expect(updated["updatedAt"] != nil)
            let missing = try await chain.load(try APIRequest(method, path: ["api", "users", "404"], body: .json(["job": "x"])))
            #expect(missing.status == .notFound)
        }
    }

    @Test("a malformed JSON body is a 400 that says so")
    func malformedBody() async throws {
        let response = try await chain.load(try APIRequest(.post, path: ["api", "users"], body: .text("{not json", contentType: "application/json")))
        #expect(response.status == .badRequest)
    }

    @Test("delete answers 204 with no body; an unknown id is 404")
    func delete() async throws {
        let response = try await chain.load(try APIRequest(.delete, path: ["api", "users", "2"]))
        #expect(response.status == .noContent)
        #expect(response.body.isEmpty)
        #expect(try await chain.load(try APIRequest(.delete, path: ["api", "users", "13"])).status == .notFound)
    }

    @Test("login gives a token for a known user, with a JSON or a form body")
    func login() async throws {
        let json = try await chain.load(
            try APIRequest(
                .post, path: ["api", "login"],
                body: .json(["email": "eve.holt@reqres.in", "password": "cityslicka"])))
        #expect(json.status == .ok)
        let token = try #require(try object(json)["token"])
        #expect(!token.isEmpty)

        let form = try await chain.load(
            try APIRequest(
                .post, path: ["api", "login"],
                body: .form([(name: "email", value: "eve.holt@reqres.in"), (name: "password", value: "x")])))
        #expect(try object(form)["token"] == token)
    }

    @Test("login and register without a password are 400 with {\"error\": \"Missing password\"}", arguments: ["login", "register"])
    func missingPassword(route: String) async throws {
        let response = try await chain.load(try APIRequest(.post, path: ["api", route], body: .json(["email": "eve.holt@reqres.in"])))
        #expect(response.status == .badRequest)
        #expect(try object(response) == ["error": "Missing password"])
    }

    @Test("register gives an id and a token to a defined user only")
    func register() async throws {
        let response = try await chain.load(
            try APIRequest(
                .post, path: ["api", "register"],
                body: .json(["email": "eve.holt@reqres.in", "password": "pistol"])))
        #expect(response.status == .ok)
        let registered = try object(response)
        #expect(registered["id"] == "4")
        #expect(registered["token"] != nil)

        let stranger = try await chain.load(
            try APIRequest(
                .post, path: ["api", "register"],
                body: .json(["email": "nobody@example.com", "password": "x"])))
        #expect(stranger.status == .badRequest)
    }

    @Test("every route honours ?delay=SECONDS")
    func delay() async throws {
        for path in [["api", "users"], ["api", "users", "3"], ["api", "echo"]] {
            let start = ContinuousClock.now
            let response = try await chain.load(try APIRequest(.get, path: path, query: [URLQueryItem(name: "delay", value: "0.25")]))
            #expect(response.status == .ok)
            #expect(ContinuousClock.now - start >= .milliseconds(250))
        }
    }

    @Test("a server started on port 0 gets its own port, and stops cleanly")
    func startStop() async throws {
        let server = try await DemoServer.start()
        #expect(server.port > 0)
        #expect(server.baseURL.absoluteString == "http://127.0.0.1:\(server.port)")
        let transport = AsyncHTTPClientTransport.forTests()
        let response = try await transport.load(try APIRequest(.get, baseURL: server.baseURL, path: ["api", "users", "1"]))
        #expect(response.status == .ok)
        await server.stop()
        // A fresh client: the shared one may still hold a pooled keep-alive connection
        // to the stopped server, which fails as connectionLost instead.
        let error = await #expect(throws: CatenaError.self) {
            try await AsyncHTTPClientTransport.withTransport { fresh in
                try await fresh.load(try APIRequest(.get, baseURL: server.baseURL, path: ["api", "users", "1"]))
            }
        }
        #expect(error?.code == .cannotConnect)
        await server.stop()
    }

    @Test("starting on a port in use fails with the bind error instead of hanging")
    func portInUse() async throws {
        let running = try await TestServer.running()
        await #expect(throws: (any Error).self) { try await DemoServer.start(port: running.port) }
    }
}

@Suite("AsyncHTTPClient transport lifecycle")
struct AsyncHTTPClientLifecycleTests {
    @Test("an owned client shuts down and really waits; a second shutdown does nothing")
    func ownedShutdown() async throws {
        let transport = AsyncHTTPClientTransport(configuration: AsyncHTTPClientTransport.defaultConfiguration)
        let response = try await transport.load(try APIRequest(.get, baseURL: try await TestServer.running().baseURL, path: ["api", "users", "1"]))
        #expect(response.status == .ok)
        try await transport.shutdown()
        try await transport.shutdown()
        let request = try APIRequest(.get, baseURL: try await TestServer.running().baseURL, path: ["api", "users", "1"])
        let error = await #expect(throws: CatenaError.self) { try await transport.load(request) }
        #expect(error?.code == .invalidRequest)
        #expect(error?.detail?.contains("shut down") == true, "\(String(describing: error))")
        // A stream fails at once too: AsyncHTTPClient fails such a task without a word to
        // its delegate, and the head's 60 s deadline must not be what ends it.
        let start = ContinuousClock.now
        let streamError = await #expect(throws: CatenaError.self) { _ = try await transport.stream(request) }
        #expect(streamError?.code == .invalidRequest)
        #expect(ContinuousClock.now - start < Timing.stretch(.seconds(5)))
    }

    @Test("withTransport shuts the client down after the body, also when it throws")
    func scoped() async throws {
        struct Expected: Error {}
        let base = try await TestServer.running().baseURL
        let status = try await AsyncHTTPClientTransport.withTransport { transport in
            try await transport.load(try APIRequest(.get, baseURL: base, path: ["api", "users", "2"])).status
        }
        #expect(status == .ok)
        await #expect(throws: Expected.self) {
            try await AsyncHTTPClientTransport.withTransport { _ in throw Expected() }
        }
    }

    @Test("a dropped owning transport shuts its client down without crashing")
    func droppedTransport() async throws {
        let base = try await TestServer.running().baseURL
        do {
            let transport = AsyncHTTPClientTransport(configuration: AsyncHTTPClientTransport.defaultConfiguration)
            #expect(try await transport.load(try APIRequest(.get, baseURL: base, path: ["api", "users", "3"])).status == .ok)
        }
        try await Task.sleep(for: .milliseconds(100))
    }
}
