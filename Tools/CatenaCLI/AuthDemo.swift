import ArgumentParser
import Catena
import Foundation

/// Token auth with a single-flight refresh: log in, read a protected resource, let
/// the token expire, then fire many requests at once and count the refreshes.
struct AuthDemo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "auth",
        abstract: "OAuth 2 token auth: log in, let the token expire, fire many requests at once, count the refreshes.",
        discussion: """
            As the OAuth loader of the \"HTTP in Swift\" loader chain: TokenAuthMiddleware gets a token by the client \
            credentials grant, then, when the token has expired, the requests fired at once share one new one. Shows the \
            token requests the server counted, and that every request got its answer. To sign in as a person, see \
            `catena login --help`.
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Option(help: "How many requests to fire at once after the token expired.")
    var requests = 50

    @Option(help: "The access token's lifetime in seconds (the demo server honours it).")
    var lifetime = 2

    func run() async throws {
        await connection.runDemo { chain, server in try await runDemo(chain, server: server) }
    }

    struct Me: Decodable { let email: String }

    func runDemo(_ chain: any HTTPLoader, server: ServerDescription) async throws {
        guard let base = URL(string: server.url), let host = base.host else { throw CommandFailure("no server URL") }
        print("OAuth 2 token auth: one refresh, however many requests need it")
        print("server     \(server.url)\(server.embedded ? " (embedded demo server)" : "")")
        print()
        let grants = Tally()
        let oauth = OAuth2Client(
            clientID: "catena-service", authentication: .clientSecretBasic("catena-service-secret"),
            endpoints: .init(token: base.appending(path: "oauth/token")), loader: chain)
        let signIn = OAuth2SignIn { client in
            grants.add("client credentials grant")
            return try await client.clientCredentials(parameters: [(name: "expires_in", value: String(lifetime))])
        }
        let auth = TokenAuthMiddleware(hosts: [base.port.map { "\(host):\($0)" } ?? host], client: oauth, signIn: signIn, leeway: .zero)
        let authorized = auth --> chain
        var steps = StepTable()

        let (me, meTime) = try await timed {
            try await authorized.load(try APIRequest(.get, baseURL: base, path: ["api", "protected", "me"])).validateStatus().decode(Me.self)
        }
        steps.add("get a token, GET /api/protected/me", status: 200, note: "\(me.email); token lives \(lifetime) s", time: meTime)

        let wait = Duration.seconds(lifetime) + .milliseconds(300)
        try await Task.sleep(for: wait)
        steps.add("wait for the token to expire", time: wait)

        let outcomes = Tally()
        let (_, burstTime) = await timed {
            await withTaskGroup(of: String.self) { group in
                for _ in 0..<requests {
                    group.addTask {
                        do {
                            return "\(try await authorized.load(try APIRequest(.get, baseURL: base, path: ["api", "protected", "me"])).status)"
                        } catch {
                            return (error as? CatenaError)?.code.rawValue ?? "\(error)"
                        }
                    }
                }
                for await outcome in group { outcomes.add(outcome) }
            }
        }
        let summary = outcomes.all.sorted { $0.key < $1.key }.map { "\($0.value) × \($0.key)" }.joined(separator: ", ")
        steps.add("\(requests) requests at once", note: summary, time: burstTime)
        steps.print()
        print()
        let refreshes = auth.refreshCount - 1
        print("token requests  \(grants.all.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", "))")
        print("refreshes       \(refreshes) for \(requests) requests\(refreshes == 1 ? " (single flight)" : "")")
    }
}

/// Counts occurrences by name, from any task.
final class Tally: Sendable {
    private let counts = Locked<[String: Int]>([:])
    func add(_ name: String) { counts.withLock { $0[name, default: 0] += 1 } }
    var all: [String: Int] { counts.withLock { $0 } }
}
