import Catena
import CatenaAsyncHTTPClient
import CatenaDemoServer
import Foundation
import Testing
@testable import CatenaTestSupport

/// A local daemon's API over a Unix domain socket: the demo server listening on one.
@Suite("Unix domain sockets (AsyncHTTPClient)")
struct UnixSocketTests {
    static func server() async throws -> RunningDemoServer {
        try await DemoServer.start(unixSocket: FileManager.default.temporaryDirectory.appendingPathComponent("catena-\(UUID().uuidString.prefix(8)).sock").path)
    }

    @Test("by request option and by environment; the Host field names the request's host; redirects stay on the socket")
    func reached() async throws {
        let server = try await Self.server()
        defer { Task { await server.stop() } }
        let socket = try #require(server.unixSocket)
        // Stretched under ThreadSanitizer, whose full run can take the redirect past 10 s.
        let transport = AsyncHTTPClientTransport.forTests(timeout: Timing.stretch(.seconds(10)))
        var request = APIRequest(.get, url: try #require(URL(string: "http://localhost:8080/api/echo/one?x=1")))
        request[option: UnixSocket.self] = socket
        let response = try await transport.load(request)
        struct Echo: Decodable { let path: String; let query: String; let authority: String }
        let echo = try JSONDecoder().decode(Echo.self, from: response.body)
        #expect(echo.path == "/api/echo/one" && echo.query == "x=1")
        #expect(echo.authority == "localhost:8080")
        let environment = ServerEnvironment(scheme: "http", host: "docker", pathPrefix: "/api", unixSocketPath: socket)
        let chain = EnvironmentMiddleware(environment) --> transport
        #expect(try await chain.load(APIRequest(.get, path: ["users", "2"])).status.code == 200)
        let redirected = try await chain.load(APIRequest(.get, path: ["redirect"], query: [URLQueryItem(name: "to", value: "/api/users/2")]))
        #expect(redirected.status.code == 200, "followed over the socket")
        #expect(server.requestsRead == 4)
    }

    @Test("a socket path too long, or one nobody listens on, fails with a clear error")
    func refused() async throws {
        let transport = AsyncHTTPClientTransport.forTests(timeout: .seconds(5))
        var request = APIRequest(.get, url: try #require(URL(string: "http://localhost/")))
        request[option: UnixSocket.self] = "/tmp/" + String(repeating: "s", count: 200)
        let long = await #expect(throws: CatenaError.self) { _ = try await transport.load(request) }
        #expect(long?.code == .invalidRequest && long?.detail?.contains("1 to 103 bytes") == true, "\(String(describing: long))")
        request[option: UnixSocket.self] = "/tmp/catena-nobody-\(UUID().uuidString.prefix(8)).sock"
        let missing = await #expect(throws: CatenaError.self) { _ = try await transport.load(request) }
        #expect(missing?.code == .cannotConnect, "\(String(describing: missing))")
    }
}
