import ArgumentParser
import Catena
import CatenaOperations
import Foundation
import ReqresAPI

/// The users chain with async/await: fetch the user list, decode it, pick a user,
/// fetch that user, decode it.
struct UsersDemo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "users",
        abstract: "A list call, then one user: fetch the user list, decode it, fetch one user, decode it.",
        discussion: """
            As in a tutorial on chaining calls with OperationQueue, through the \"HTTP in Swift\" loader chain: two calls, \
            errors reaching the caller. --engine operations runs it as two chained EndpointOperations (PeakOperation's \
            result passing); --trace prints the run's spans and metrics.
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Option(help: "The user to fetch; by default the first one on the list.")
    var userID: Int?

    @Option(help: "The page of the user list to fetch.")
    var page = 1

    @Option(help: "async: async/await; operations: CatenaOperations on an OperationQueue (the tutorial's way).")
    var engine = Engine.async

    @Flag(help: "Watch a content loader load the user list page after page, then refresh it once, through an HTTP cache.")
    var watch = false

    @Option(help: "Users per page with --watch.")
    var perPage = 4

    @Flag(help: "Also create a user (POST /api/users).")
    var create = false

    @Flag(help: "Also update the user (PATCH /api/users/{id}).")
    var update = false

    @Flag(help: "Also delete the user (DELETE /api/users/{id}).")
    var delete = false

    @Flag(help: "Trace the run: print each call's span (OpenTelemetry conventions) as a tree, and the metrics, from an in-memory tracer and metrics backend.")
    var trace = false

    func validate() throws {
        guard perPage >= 1 else { throw ValidationError("--per-page must be at least 1") }
        guard !watch || (!create && !update && !delete && userID == nil && engine == .async && !trace) else {
            throw ValidationError("--watch runs on its own: leave out --user-id, --create, --update, --delete, --engine and --trace")
        }
    }

    func run() async throws {
        if watch {
            let cache = CacheMiddleware()
            await connection.runDemo(wrapping: { cache --> $0 }) { chain, server in
                try await watchPages(Client(chain), cache: cache, server: server)
            }
            return
        }
        guard trace else {
            await connection.runDemo { chain, server in try await runChain(chain, server: server) }
            return
        }
        let report = TraceReport()
        await connection.runDemo { chain, server in
            try await report.run("catena demo users") { try await runChain(report.instrument(chain), server: server) }
            report.print()
        }
    }

    /// A content loader pages through the user list, printing each state as it
    /// changes, then refreshes once: the HTTP cache below it revalidates (304).
    @MainActor
    func watchPages(_ client: Client, cache: CacheMiddleware, server: ServerDescription) async throws {
        print("A content loader: the user list page after page, then one refresh, through an HTTP cache")
        print("server     \(server.url)\(server.embedded ? " (embedded demo server)" : "")")
        print("transport  \(server.transport)")
        print()
        let perPage = perPage
        let loader = ContentLoader(client: client, pages: { ListUsersEndpoint(page: $0, perPage: perPage) })
        let start = ContinuousClock.now
        let token = loader.observe { state in
            let detail: String =
                switch state {
                case .initial: ""
                case .loading(let cache): cache.map { "showing \($0.items.count) users" } ?? ""
                case .success(let pages): "page \(pages.loadedPages) of \(pages.pageCount), \(pages.items.count) users"
                case .failure(let error, _): "\(error)"
                }
            let name =
                switch state {
                case .initial: "initial"
                case .loading: "loading"
                case .success: "success"
                case .failure: "failure"
                }
            print("  \(Terminal.milliseconds(ContinuousClock.now - start).leftPadding(9))  \(name.padding(8))  \(detail)")
        }
        defer { token.cancel() }
        while loader.startLoading() {
            try await settled(loader)
        }
        print("  refresh")
        loader.refresh()
        try await settled(loader)
        let stats = cache.statistics
        let responses = stats.misses + stats.fromCache
        print()
        print("users      \(loader.state.content?.items.count ?? 0) shown after the refresh (page 1)")
        print(
            "responses  \(responses): \(stats.misses) from the server, \(stats.fromCache) from the cache (\(stats.revalidated) revalidated with 304, \(stats.hits) fresh)"
        )
        print("total      \(Terminal.milliseconds(ContinuousClock.now - start))")
    }

    /// Waits until `loader` has stopped loading; throws its error if it failed.
    @MainActor
    func settled<Content>(_ loader: ContentLoader<Content>) async throws {
        for await state in loader.states where !state.isLoading {
            if let error = state.error { throw error }
            return
        }
    }

    func runChain(_ chain: any HTTPLoader, server: ServerDescription) async throws {
        print("The users chain: user list, then one user")
        print("server     \(server.url)\(server.embedded ? " (embedded demo server)" : "")")
        print("transport  \(server.transport)")
        print()
        let total = ContinuousClock.now
        var steps = StepTable()
        let (list, user) =
            switch engine {
            case .async: try await asyncChain(chain, steps: &steps)
            case .operations: try await operationsChain(chain, steps: &steps)
            }
        let id = user.id

        let client = Client(chain)
        var writes: [String] = []
        if create {
            let created = try await client.sendWithMetadata(CreateUserEndpoint(UserFields(name: "morpheus", job: "leader")))
            writes.append(
                "created    \(created.status.code): id \(created.content.id), \(created.content.name ?? "") (\(created.content.job ?? "")) at \(created.content.createdAt)"
            )
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

    /// The chain with async/await: each call, then decoding its content.
    func asyncChain(_ chain: any HTTPLoader, steps: inout StepTable) async throws -> (UserPage, User) {
        let context = EndpointContext()
        func call<E: Endpoint>(_ endpoint: E) async throws -> E.Content {
            let request = try endpoint.buildRequest()
            let (response, time) = try await timed { try await chain.load(request) }
            steps.add(Fetched(endpoint: endpoint, response: response), time: time)
            let (content, decodeTime) = try await timed { () throws -> E.Content in
                try endpoint.validate(response)
                return try endpoint.content(from: response, context: context)
            }
            steps.add("decode \(E.Content.self)", time: decodeTime)
            return content
        }
        let list = try await call(ListUsersEndpoint(page: page))
        let user = try await call(UserEndpoint(id: try pick(from: list)))
        return (list, user)
    }

    /// The same chain as the OperationQueue tutorial builds it: four operations on an OperationQueue (fetch,
    /// decode, fetch, decode), each passing its result to the next.
    func operationsChain(_ chain: any HTTPLoader, steps: inout StepTable) async throws -> (UserPage, User) {
        let fetchList = FetchOperation(chain) { (_: Void) in ListUsersEndpoint(page: page) }
        fetchList.input = .success(())
        let decodeList = DecodeOperation<ListUsersEndpoint>()
        let fetchUser = FetchOperation(chain) { (list: UserPage) in UserEndpoint(id: try pick(from: list)) }
        let decodeUser = DecodeOperation<UserEndpoint>()
        let operations = fetchList.passesResult(to: decodeList).passesResult(to: fetchUser).passesResult(to: decodeUser)
        let user = try await operations.value()
        // Each call, then its decoding, with the operations' own times. Every operation
        // succeeded when the last one did.
        steps.add(try fetchList.output!.get(), time: fetchList.executionTime ?? .zero)
        steps.add("decode \(UserPage.self)", time: decodeList.executionTime ?? .zero)
        steps.add(try fetchUser.output!.get(), time: fetchUser.executionTime ?? .zero)
        steps.add("decode \(User.self)", time: decodeUser.executionTime ?? .zero)
        return (try decodeList.output!.get(), user)
    }

    /// The user to fetch: `--user-id`, or the first on the list.
    func pick(from list: UserPage) throws -> Int {
        guard let id = userID ?? list.data.first?.id else {
            throw CommandFailure("page \(page) of the user list has no users to pick from")
        }
        return id
    }
}

/// How a demo runs its chain.
enum Engine: String, ExpressibleByArgument, CaseIterable {
    case async, operations
}

/// A response together with the endpoint that asked for it.
struct Fetched<E: Endpoint>: Sendable {
    let endpoint: E
    let response: APIResponse
}

/// The tutorial's network operation: loads the endpoint its input names, leaves decoding to
/// the next operation.
final class FetchOperation<Input: Sendable, E: Endpoint>: TaskOperation<Input, Fetched<E>>, @unchecked Sendable {
    // @unchecked Sendable: no state of its own.
    init(_ chain: any HTTPLoader, makeEndpoint: @escaping @Sendable (Input) throws -> E) {
        super.init { input in
            let endpoint = try makeEndpoint(input)
            return Fetched(endpoint: endpoint, response: try await chain.load(try endpoint.buildRequest()))
        }
    }
}

/// The tutorial's decoding adapter, one generic operation for every endpoint: validates the
/// response and produces the endpoint's content.
final class DecodeOperation<E: Endpoint>: ConsumingOperation<Fetched<E>, E.Content>, @unchecked Sendable {
    // @unchecked Sendable: no state of its own.
    override func execute(input: Fetched<E>) {
        finish(
            with: Result {
                try input.endpoint.validate(input.response)
                return try input.endpoint.content(from: input.response, context: EndpointContext())
            })
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

    /// A call: "GET /api/users?page=1  200  1234 bytes".
    mutating func add<E>(_ fetched: Fetched<E>, time: Duration) {
        let request = fetched.response.request
        add(
            "\(request.method.rawValue) \(request.pathAndQuery)", status: fetched.response.status.code, note: "\(fetched.response.body.count) bytes", time: time
        )
    }

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

    /// Writes `text` to standard output at once, without a line end.
    static func write(_ text: String) {
        print(text, terminator: "")
        fflush(nil)  // every stream: naming `stdout` is not concurrency-safe in Swift 6
    }

    /// Runs `body`; a failure is printed with ``fail(_:)``.
    static func failing(_ body: () async throws -> Void) async {
        do {
            try await body()
        } catch let failure as CommandFailure {
            fail(failure.description)
        } catch let error as CatenaError {
            fail(error.description)
        } catch {
            fail(String(describing: error))
        }
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
