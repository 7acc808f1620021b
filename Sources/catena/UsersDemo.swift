import ArgumentParser
import Catena
import Foundation
import ReqresAPI

/// Seed 000's chain with async/await: fetch the user list, decode it, pick a user,
/// fetch that user, decode it.
struct UsersDemo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "users",
        abstract: "Seed 000's chain: fetch the user list, decode it, fetch one user, decode it."
    )

    @OptionGroup var connection: ConnectionOptions

    @Option(help: "The user to fetch; by default the first one on the list.")
    var userID: Int?

    @Option(help: "The page of the user list to fetch.")
    var page = 1

    @Flag(help: "Also create a user (POST /api/users).")
    var create = false

    @Flag(help: "Also update the user (PATCH /api/users/{id}).")
    var update = false

    @Flag(help: "Also delete the user (DELETE /api/users/{id}).")
    var delete = false

    func run() async throws {
        await connection.runDemo { chain, server in try await runChain(chain, server: server) }
    }

    func runChain(_ chain: any HTTPLoader, server: ServerDescription) async throws {
        print("Seed 000's chain: user list, then one user")
        print("server     \(server.url)\(server.embedded ? " (embedded demo server)" : "")")
        print("transport  \(server.transport)")
        print()
        let total = ContinuousClock.now
        var steps = StepTable()
        let context = EndpointContext()

        // Each endpoint in the seed's two steps: the call, then decoding its content.
        func call<E: Endpoint>(_ endpoint: E) async throws -> E.Content {
            let request = try endpoint.buildRequest()
            let (response, time) = try await timed { try await chain.load(request) }
            steps.add("\(request.method.rawValue) \(response.request.pathAndQuery)", status: response.status.code, note: "\(response.body.count) bytes", time: time)
            let (content, decodeTime) = try await timed { () throws -> E.Content in
                try endpoint.validate(response)
                return try endpoint.content(from: response, context: context)
            }
            steps.add("decode \(E.Content.self)", time: decodeTime)
            return content
        }

        let list = try await call(ListUsersEndpoint(page: page))
        guard let id = userID ?? list.data.first?.id else {
            throw CommandFailure("page \(page) of the user list has no users to pick from")
        }
        let user = try await call(UserEndpoint(id: id))

        let client = Client(chain)
        var writes: [String] = []
        if create {
            let created = try await client.sendWithMetadata(CreateUserEndpoint(UserFields(name: "morpheus", job: "leader")))
            writes.append("created    \(created.status.code): id \(created.content.id), \(created.content.name ?? "") (\(created.content.job ?? "")) at \(created.content.createdAt)")
        }
        if update {
            let updated = try await client.sendWithMetadata(UpdateUserEndpoint(id: id, fields: UserFields(job: "zion resident")))
            writes.append("updated    \(updated.status.code): user \(id) job \(updated.content.job ?? "") at \(updated.content.updatedAt)")
        }
        if delete {
            let deleted = try await client.sendWithMetadata(DeleteUserEndpoint(id: id))
            writes.append("deleted    \(deleted.status.code): user \(id)")
        }

        steps.print()
        print()
        print("User \(user.id): \(user.firstName) \(user.lastName) <\(user.email)>")
        print("avatar     \(user.avatar)")
        print("list       \(list.data.count) of \(list.total) users, page \(list.page) of \(list.totalPages)")
        for line in writes { print(line) }
        print("total      \(Terminal.milliseconds(ContinuousClock.now - total))")
    }
}

/// Runs `work` and measures it.
func timed<T>(_ work: () async throws -> T) async rethrows -> (T, Duration) {
    let start = ContinuousClock.now
    let value = try await work()
    return (value, ContinuousClock.now - start)
}

extension APIRequest {
    /// "/api/users?page=1"
    var pathAndQuery: String {
        percentEncodedPath + (percentEncodedQuery.map { "?\($0)" } ?? "")
    }
}

struct StepTable {
    private var rows: [(step: String, status: String, note: String, time: String)] = []

    mutating func add(_ step: String, status: Int? = nil, note: String = "", time: Duration) {
        rows.append((step, status.map(String.init) ?? "", note, Terminal.milliseconds(time)))
    }

    func print() {
        let stepWidth = rows.map(\.step.count).max() ?? 0
        let noteWidth = rows.map(\.note.count).max() ?? 0
        for (index, row) in rows.enumerated() {
            Swift.print("  \(index + 1)  \(row.step.padding(stepWidth))  \(row.status.padding(3))  \(row.note.padding(noteWidth))  \(row.time.leftPadding(9))")
        }
    }
}

enum Terminal {
    static func milliseconds(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        let ms = Double(seconds) * 1000 + Double(attoseconds) / 1e15
        return ms < 10 ? String(format: "%.2f ms", ms) : String(format: "%.1f ms", ms)
    }

    /// Prints "error: …" on one line to standard error and exits with status 1.
    static func fail(_ message: String) -> Never {
        let line = "error: " + message.replacingOccurrences(of: "\n", with: " ") + "\n"
        FileHandle.standardError.write(Data(line.utf8))
        exit(1)
    }
}

extension String {
    func padding(_ width: Int) -> String { count >= width ? self : self + String(repeating: " ", count: width - count) }
    func leftPadding(_ width: Int) -> String { count >= width ? self : String(repeating: " ", count: width - count) + self }
}
