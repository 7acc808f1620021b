// A generated OpenAPI client's transport through a Catena chain, and OpenAPI
// middleware inside one.
// Runs against the embedded demo server: `swift run --enable-all-traits OpenAPI`.

// snippet.hide
import CatenaDemoServer
import Foundation
import HTTPTypes
import OpenAPIRuntime

let server = try await DemoServer.start()
let origin = "127.0.0.1:\(server.port)"
let oauth = OAuth2Client(
    clientID: "catena-service", authentication: .clientSecretBasic("catena-service-secret"),
    endpoints: .init(token: server.baseURL.appendingPathComponent("oauth/token")), loader: AsyncHTTPClientTransport())
// snippet.show
import Catena
import CatenaAsyncHTTPClient
import CatenaOpenAPI

// snippet.transport
// The chain a generated client's requests go through: retries, a token, a cache.
let transport = CatenaClientTransport(
    RetryMiddleware()
        --> TokenAuthMiddleware(hosts: [origin], client: oauth, signIn: .clientCredentials())
        --> CacheMiddleware()
        --> AsyncHTTPClientTransport())
// A generated client takes it unchanged:
//     let client = Client(serverURL: server.baseURL, transport: transport)
//     let page = try await client.listUsers(query: .init(page: 1)).ok.body.json
// snippet.end

// snippet.hide
let (head, body) = try await transport.send(
    HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/api/users/2"), body: nil,
    baseURL: server.baseURL, operationID: "getUser")
print(head.status, try await String(collecting: body ?? HTTPBody(), upTo: 1 << 20).count)
// snippet.show

// snippet.middleware
/// Middleware written for swift-openapi-runtime...
struct StampRequests: ClientMiddleware {
    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        var request = request
        request.headerFields[HTTPField.Name("x-operation")!] = operationID
        return try await next(request, body, baseURL)
    }
}

/// ...runs as a link in any Catena chain.
let chain = OpenAPIMiddleware(StampRequests()) --> AsyncHTTPClientTransport()
// snippet.end

// snippet.hide
print(try await chain.load(APIRequest(url: server.baseURL.appendingPathComponent("api/users/2"))).status)
await server.stop()
