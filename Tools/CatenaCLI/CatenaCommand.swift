import ArgumentParser
import Catena
import CatenaDemoServer
import CatenaAsyncHTTPClient
import Foundation
import HTTPTypes
import Logging

@main
struct CatenaCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "catena",
        abstract: "Calls any API through a Catena chain, runs the demos against an embedded demo API server, or serves it.",
        subcommands: [
            Demo.self, Serve.self, RequestCommand.self, GetCommand.self, PostCommand.self, WebSocketCommand.self, LoginCommand.self, LogoutCommand.self,
        ]
    )
}

struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Runs a demo against the embedded demo server.",
        discussion: """
            users: a list call, then one user. photos: a 1 + 100 fan-out with retries. auth: token refresh. \
            stream: an event stream. openapi: a generated OpenAPI client through a Catena chain.
            """,
        subcommands: [UsersDemo.self, PhotosDemo.self, AuthDemo.self, StreamDemo.self, OpenAPIDemo.self]
    )
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Runs the demo API server until interrupted (Ctrl-C).")

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "The port to listen on; 0 picks a free one.")
    var port = 8080

    @Flag(help: "Serve HTTPS (HTTP/2 and HTTP/1.1) with a throwaway CA made now; its certificate is written to --ca-out.")
    var tls = false

    @Option(help: "Where --tls writes the CA certificate (PEM) for clients to trust.")
    var caOut = "catena-demo-ca.pem"

    func run() async throws {
        var settings: DemoTLS?
        if tls {
            do {
                let authority = try DemoCertificateAuthority()
                try authority.certificatePEM.write(toFile: caOut, atomically: true, encoding: .utf8)
                settings = DemoTLS(certificate: try authority.issue(for: ["localhost", "127.0.0.1", "::1", host]))
                let path = URL(fileURLWithPath: caOut).standardizedFileURL.path
                Terminal.write("CA certificate written to \(path): trust it with --ca-file \(path)\n")
            } catch {
                Terminal.fail("cannot make the TLS certificates: \(error)")
            }
        }
        do {
            try await DemoServer.serve(host: host, port: port, tls: settings, logLevel: .info) { url in
                // Flushed: a script that pipes the output waits for this line.
                Terminal.write("Catena demo server listening on \(url.absoluteString) (Ctrl-C to stop)\n")
            }
        } catch {
            Terminal.fail("cannot serve on \(host):\(port): \(error)")
        }
    }
}

/// Where a demo sends its requests, and how.
struct ConnectionOptions: ParsableArguments {
    @Option(help: "The API server. Without it, an embedded demo server is started on 127.0.0.1.")
    var baseURL: String?

    @Option(help: "The transport: ahc (AsyncHTTPClient) or urlsession.")
    var transport: TransportKind = .ahc

    @Option(name: .customLong("header"), help: "A header sent with every request, as \"Name: value\" (repeatable).")
    var headers: [String] = []

    @Flag(name: .shortAndLong, help: "Log each request and response (secrets redacted).")
    var verbose = false

    @Flag(help: "With --verbose, log each request as a curl command too (secrets redacted).")
    var curl = false

    @Option(help: "Trust the CA certificates in this PEM file besides the system's (as `catena serve --tls` writes).")
    var caFile: String?

    @Flag(help: "Run the embedded demo server over HTTPS with a throwaway CA, trusted through Catena's ServerTrust.")
    var tls = false

    enum TransportKind: String, ExpressibleByArgument, CaseIterable {
        case ahc, urlsession

        var name: String { self == .ahc ? "AsyncHTTPClient" : "URLSession" }

        func makeLoader(trust: ServerTrust) throws -> any HTTPLoader {
            if trust.isSystemDefault {
                return switch self {
                case .ahc: AsyncHTTPClientTransport(timeout: .seconds(30))
                case .urlsession: URLSessionTransport(timeout: .seconds(30))
                }
            }
            do {
                return switch self {
                case .ahc: try AsyncHTTPClientTransport(trust: trust, timeout: .seconds(30))
                case .urlsession: try URLSessionTransport(trust: trust, timeout: .seconds(30))
                }
            } catch {
                throw CommandFailure("\(name) cannot use that trust: \(error)")
            }
        }
    }

    /// Runs a demo with ``withChain(photos:wrapping:_:)``; any failure is printed as
    /// one line on standard error and exits with 1.
    func runDemo(
        photos: PhotoSettings = PhotoSettings(), wrapping wrap: (any HTTPLoader) -> any HTTPLoader = { $0 },
        _ body: (any HTTPLoader, ServerDescription) async throws -> Void
    ) async {
        await Terminal.failing { try await withChain(photos: photos, wrapping: wrap, body) }
    }

    /// Runs `body` with a chain to the chosen server; starts and stops the embedded
    /// server when no base URL is given.
    func withChain<Result>(
        photos: PhotoSettings = PhotoSettings(), wrapping wrap: (any HTTPLoader) -> any HTTPLoader = { $0 },
        _ body: (any HTTPLoader, ServerDescription) async throws -> Result
    ) async throws -> Result {
        var fields = HTTPFields()
        for header in headers {
            let parts = header.split(separator: ":", maxSplits: 1)
            guard parts.count == 2, let name = HTTPField.Name(parts[0].trimmingCharacters(in: .whitespaces)) else {
                throw CommandFailure("--header \"\(header)\" is not \"Name: value\"")
            }
            fields.append(HTTPField(name: name, value: parts[1].trimmingCharacters(in: .whitespaces)))
        }
        var logger = Logger(label: "catena")
        logger.logLevel = verbose ? .debug : .critical
        var trust = try ServerTrust.system(adding: caFile)
        var serverTLS: DemoTLS?
        if tls, baseURL != nil {
            throw CommandFailure("--tls serves the embedded server over HTTPS; with --base-url, give an https URL (and --ca-file) instead")
        }
        if tls {
            do {
                let authority = try DemoCertificateAuthority()
                serverTLS = DemoTLS(certificate: try authority.issue())
                trust.additionalRoots += [authority.certificateDER]
            } catch {
                throw CommandFailure("cannot make the TLS certificates: \(error)")
            }
        }
        let transport = wrap(try transport.makeLoader(trust: trust))
        // Headers given on the command line are usually keys: never print their values.
        let redaction = Redaction.adding(headers: fields.map(\.name))

        if let baseURL {
            guard let url = URL(string: baseURL), let environment = ServerEnvironment(baseURL: url, headerFields: fields) else {
                throw CommandFailure(
                    "--base-url \"\(Redaction.default.redact(urlString: baseURL))\" is not an absolute http or https URL "
                        + "(user info goes only over https or to a loopback host)")
            }
            let chain = EnvironmentMiddleware(environment) --> LogMiddleware(logger: logger, redaction: redaction, logsCurlCommands: curl) --> transport
            // User info became the environment's Authorization header: never print it.
            var shown = URLComponents(url: url, resolvingAgainstBaseURL: false)
            shown?.user = nil
            shown?.password = nil
            let display = shown?.url?.absoluteString ?? Redaction.default.redact(urlString: url.absoluteString)
            return try await body(chain, ServerDescription(url: display, embedded: false, transport: self.transport.name))
        }
        let server: RunningDemoServer
        do {
            server = try await DemoServer.start(photos: photos, tls: serverTLS)
        } catch {
            throw CommandFailure("cannot start the embedded demo server: \(error)")
        }
        do {
            let environment = ServerEnvironment(baseURL: server.baseURL, headerFields: fields)!
            let chain = EnvironmentMiddleware(environment) --> LogMiddleware(logger: logger, redaction: redaction, logsCurlCommands: curl) --> transport
            let result = try await body(chain, ServerDescription(url: server.baseURL.absoluteString, embedded: true, transport: self.transport.name))
            await server.stop()
            return result
        } catch {
            await server.stop()
            throw error
        }
    }
}

struct ServerDescription {
    let url: String
    let embedded: Bool
    let transport: String
}

/// A failure the command reports in one line on standard error, exiting with 1.
extension ServerTrust {
    /// The system's roots, and those in the PEM file `--ca-file` names.
    static func system(adding caFile: String?) throws -> ServerTrust {
        guard let caFile else { return .system }
        do {
            return try ServerTrust(additionalRootsPEM: String(contentsOfFile: caFile, encoding: .utf8))
        } catch {
            throw CommandFailure("--ca-file \(caFile): \(error)")
        }
    }
}

struct CommandFailure: Error, CustomStringConvertible {
    let description: String
    init(_ message: String) { description = message }
}
