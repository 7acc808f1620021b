// Chaining calls on OperationQueue: a chain that passes results, a retrying fan-out,
// and an operation of your own.
// Runs against the embedded demo server: `swift run --enable-all-traits Operations`.

// snippet.hide
import CatenaDemoServer

let server = try await DemoServer.start()
let environment = ServerEnvironment(scheme: "http", host: "127.0.0.1", port: server.port)
// snippet.show
import Catena
import CatenaAsyncHTTPClient
import CatenaOperations
import Foundation

// snippet.setup
struct User: Decodable, Sendable {
    let id: Int
    let email: String
}
struct UserPage: Decodable, Sendable { let data: [User] }

struct ListUsers: JSONEndpoint {
    typealias Content = UserPage
    func makeRequest() throws -> APIRequest { try .get("api", "users") }
}

struct GetUser: JSONEndpoint {
    typealias Content = User
    let id: Int
    func makeRequest() throws -> APIRequest { try .get("api", "users", String(id)) }
    func content(from response: APIResponse, context: EndpointContext) throws -> User {
        struct Envelope: Decodable { let data: User }
        return try response.decode(Envelope.self, decoder: context.decoder).data
    }
}

let client = Client(EnvironmentMiddleware(environment) --> AsyncHTTPClientTransport())
// snippet.end

// snippet.chain
// The list, then the first user on it. Each operation passes its Result to the next;
// a failure passes forward and reaches the end.
let chain = EndpointOperation(client: client, endpoint: ListUsers())
    .passesResult(to: EndpointOperation(client: client) { (page: UserPage) in GetUser(id: page.data[0].id) })
let first = try await chain.value()  // or chain.enqueue(on: queue) and a result block on the last
print(first.email)
// snippet.end

// snippet.group
// One retrying call per user, 4 at a time, on the group's own queue.
let retrying = OperationRetryStrategy.backoff(
    maxAttempts: 3, delay: .exponential(initial: .milliseconds(20), maximum: .seconds(1)),
    if: OperationRetryStrategy.transientHTTPFailure)
let group = GroupOperation.collecting(
    (1...12).map { id in
        RetryingOperation(strategy: retrying) { _ in EndpointOperation(client: client, endpoint: GetUser(id: id)) }
    }, maxConcurrent: 4)
group.addResultBlock { result in  // runs once, from the operation's thread
    print("done")
}
let results = try await group.value()  // one Result per user, in order
print(results.count)
// snippet.end

// snippet.own
/// An operation of your own: override `execute()`, finish once, from any thread.
final class Greeting: ResultOperation<String>, @unchecked Sendable {
    // @unchecked Sendable: no state of its own beyond its superclass's.
    override func execute() {
        DispatchQueue.global().async { self.finish(withResult: "hello") }
    }
}
// snippet.end

// snippet.hide
print(try await Greeting().value())
await server.stop()
