// Endpoints, the client, fan-out, downloads and uploads.
// Runs against the embedded demo server: `swift run --enable-all-traits Endpoints`.

// snippet.hide
import CatenaDemoServer

let server = try await DemoServer.start()
let environment = ServerEnvironment(scheme: "http", host: "127.0.0.1", port: server.port)
// snippet.show
import Catena
import CatenaAsyncHTTPClient
import Foundation

// snippet.models
struct User: Codable, Sendable {
    let id: Int
    let email: String
}

/// What the API sends with a failure: `{"error": "..."}`.
struct APIFailure: APIErrorBody {
    let error: String
}
// snippet.end

// snippet.define
struct UserEndpoint: JSONEndpoint {
    typealias Content = User
    typealias ErrorBody = APIFailure  // a failure's body, decoded into the error
    let id: Int

    func makeRequest() throws -> APIRequest {
        guard id >= 1 else { throw EndpointInputError(field: "id", "must be 1 or more, not \(id)") }
        return try .get("api", "users", String(id))
    }

    func content(from response: APIResponse, context: EndpointContext) throws -> User {
        struct Envelope: Decodable { let data: User }
        return try response.decode(Envelope.self, decoder: context.decoder).data
    }
}

struct DeleteUserEndpoint: VoidEndpoint {  // accepts 204 and an empty body
    let id: Int
    func makeRequest() throws -> APIRequest { try .delete("api", "users", String(id)) }
}
// snippet.end

// snippet.client
let client = Client(EnvironmentMiddleware(environment) --> RetryMiddleware() --> AsyncHTTPClientTransport())
let user = try await client.send(UserEndpoint(id: 2))  // User
try await client.send(DeleteUserEndpoint(id: 2))  // Void
let sent = try await client.sendWithMetadata(UserEndpoint(id: 2))  // content with status, headers, duration
print(user.email, sent.status)

let handle = client.send(UserEndpoint(id: 3)) { result in  // runs exactly once, also when cancelled
    print(result)
}
await handle.wait()
// snippet.end

// snippet.errors
do {
    _ = try await client.send(UserEndpoint(id: 0))
} catch {
    print(error.code)  // invalidRequest: "id must be 1 or more, not 0", nothing sent
}
// snippet.end

// snippet.fanout
let endpoints = (1...12).map { UserEndpoint(id: $0) }
let results = try await client.sendAll(endpoints, maxConcurrent: 4) { progress in
    print("\(progress.completed)/\(progress.total)")
}  // [Result<User, CatenaError>], in the order of the endpoints

let users = try await client.sendAllOrFail(endpoints, maxConcurrent: 4)  // the first failure cancels the rest

let (progress, task) = client.fanOut(endpoints, maxConcurrent: 4)  // progress as an AsyncSequence
for await step in progress { print(step.completed, step.failed) }
print(results.count, users.count, try await task.value.count)
// snippet.end

// snippet.download
struct Report: DownloadEndpoint {
    let destination: URL
    func makeRequest() throws -> APIRequest { try .get("api", "bytes", "1000000") }
}

let file = FileManager.default.temporaryDirectory.appendingPathComponent("report.bin")
let download = client.download(Report(destination: file))
for await step in download.progress { print(step.completed, step.total ?? -1) }
print(try await download.value())  // the file's URL, written whole or not at all
// snippet.end

// snippet.upload
struct Upload: DataEndpoint {
    let file: URL
    func makeRequest() throws -> APIRequest { try .post("api", "echo", body: .file(file)) }  // read as it is sent
}

let upload = client.upload(Upload(file: file))
let progressForUI = upload.foundationProgress  // for a ProgressView, say
_ = try await upload.value()
print(progressForUI.fractionCompleted)
// snippet.end

// snippet.hide
try? FileManager.default.removeItem(at: file)
await server.stop()
