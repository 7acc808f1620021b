import ArgumentParser
import Catena
import CatenaDemoServer
import Foundation

/// Where `catena login` keeps a sign-in: the token in ``SavedLogin/storage``, the
/// server and client (nothing secret) in `logins/NAME.json` beside the tokens.
struct SavedLogin: Codable {
    var clientID: String
    var endpoints: OAuth2Client.Endpoints
    /// The origins (`host` or `host:port`, as ``TokenAuthMiddleware`` takes them) the
    /// token may go to: the issuer's and each `--resource` given at login.
    var origins: [String]

    init(clientID: String, endpoints: OAuth2Client.Endpoints, origins: [String]) {
        self.clientID = clientID
        self.endpoints = endpoints
        self.origins = origins
    }

    private enum CodingKeys: String, CodingKey { case clientID, endpoints, origins }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        clientID = try container.decode(String.self, forKey: .clientID)
        endpoints = try container.decode(OAuth2Client.Endpoints.self, forKey: .endpoints)
        // A sign-in saved before origins were recorded: its issuer's only.
        origins = try container.decodeIfPresent([String].self, forKey: .origins) ?? [endpoints.issuer ?? endpoints.token].map(Self.origin(of:))
    }

    /// `host` or `host:port` (the port when the URL names one), lowercased: how
    /// ``TokenAuthMiddleware`` names an origin.
    static func origin(of url: URL) -> String {
        let host = (url.host ?? "").lowercased()
        let bracketed = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        return url.port.map { "\(bracketed):\($0)" } ?? bracketed
    }

    /// The Keychain on Apple platforms, unless CATENA_TOKEN_STORAGE=file asks for files.
    static var usesKeychain: Bool {
        #if canImport(Security)
        ProcessInfo.processInfo.environment["CATENA_TOKEN_STORAGE"] != "file"
        #else
        false
        #endif
    }

    static var storage: any TokenStorage {
        #if canImport(Security)
        if usesKeychain { return KeychainTokenStorage(service: "catena") }
        #endif
        return FileTokenStorage()
    }

    /// Where the tokens are, for the messages.
    static var storageDescription: String {
        usesKeychain ? "in the Keychain (service \"catena\")" : "in \(FileTokenStorage.defaultDirectory.path)/NAME.json (mode 0600)"
    }

    static let storageHelp = """
        Tokens are kept in the Keychain on macOS (CATENA_TOKEN_STORAGE=file keeps them in files there too), elsewhere in \
        ~/.config/catena/tokens/NAME.json, mode 0600 ($XDG_CONFIG_HOME/catena/tokens when that is set); the server and \
        client id in ../logins/NAME.json beside them.
        """

    static func file(_ name: String) throws -> URL {
        // The storage checks the name the same way: one file name, no path.
        _ = try FileTokenStorage().file(named: name)
        return FileTokenStorage.defaultDirectory.deletingLastPathComponent().appending(path: "logins/\(name).json")
    }

    static func load(_ name: String) throws -> SavedLogin {
        let url = try file(name)
        // It says where tokens are sent: only a file of this user's that no one else may write counts.
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: url.path) else {
            throw CommandFailure("no sign-in named \(name): run `catena login \(name) …` first")
        }
        let mode = (attributes[.posixPermissions] as? Int) ?? 0o777
        guard attributes[.type] as? FileAttributeType == .typeRegular, (attributes[.ownerAccountID] as? Int).map({ UInt32($0) == geteuid() }) == true,
            mode & 0o022 == 0
        else { throw CommandFailure("\(url.path) is not a file of this user's that only this user may write: remove it and sign in again") }
        guard let data = try? Data(contentsOf: url) else { throw CommandFailure("no sign-in named \(name): run `catena login \(name) …` first") }
        do {
            return try JSONDecoder().decode(SavedLogin.self, from: data)
        } catch {
            throw CommandFailure("\(url.path) is not a sign-in: remove it and run `catena login \(name) …` again")
        }
    }

    func save(_ name: String) throws {
        let url = try Self.file(name)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try JSONEncoder().encode(self).write(to: url, options: .atomic)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: url.path)
    }

    func client(loader: any HTTPLoader) -> OAuth2Client {
        OAuth2Client(clientID: clientID, endpoints: endpoints, loader: loader)
    }
}

struct LoginCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "login",
        abstract: "Signs in to an OAuth 2 server and keeps the token under NAME, for --auth NAME.",
        discussion: """
            Reads the server's metadata (RFC 8414) from --issuer, then signs in with the device authorization grant \
            (RFC 8628: a code to enter in a browser anywhere; the default) or, with --pkce, the authorization code flow \
            with PKCE, redirected to a listener on 127.0.0.1. Without --issuer, signs in to an embedded demo server, \
            which approves its client catena-cli by itself: `catena login demo --device` needs nothing else. \
            \(SavedLogin.storageHelp)
            """
    )

    @Argument(help: "The name to keep the sign-in under: 1 to 64 letters, digits, '.', '_' or '-'.")
    var name: String

    @Option(help: "The authorization server's issuer URL. Without it, an embedded demo server is started and signed in to.")
    var issuer: String?

    @Option(help: "The client id registered at the server (catena-cli at the demo server).")
    var clientID: String?

    @Flag(help: "Sign in with a code entered in a browser anywhere (device authorization grant). The default.")
    var device = false

    @Flag(help: "Sign in in this machine's browser (authorization code with PKCE and a loopback redirect).")
    var pkce = false

    @Option(name: .customLong("scope"), help: "A scope to ask for (repeatable).")
    var scopes: [String] = []

    @Option(
        name: .customLong("resource"),
        help: "An API the token is for (repeatable): --auth sends the token to the issuer's origin and these origins only.")
    var resources: [String] = []

    @Option(
        help:
            "Listen for the --pkce redirect on this port of 127.0.0.1, for servers that compare redirect URIs exactly (register http://127.0.0.1:PORT/callback)."
    )
    var redirectPort: UInt16?

    @Option(help: "Trust the CA certificates in this PEM file besides the system's.")
    var caFile: String?

    @Option(help: "The transport: ahc (AsyncHTTPClient) or urlsession.")
    var transport: ConnectionOptions.TransportKind = .ahc

    func validate() throws {
        guard !(device && pkce) else { throw ValidationError("give --device or --pkce, not both") }
        do {
            _ = try FileTokenStorage().file(named: name)
        } catch {
            throw ValidationError("\(error)")
        }
        if issuer != nil, clientID == nil { throw ValidationError("--issuer needs --client-id: the id the server registered this tool under") }
        for resource in resources where URL(string: resource)?.host == nil || !["http", "https"].contains(URL(string: resource)?.scheme?.lowercased()) {
            throw ValidationError("--resource \"\(resource)\" is not an absolute http or https URL")
        }
        if redirectPort != nil, !pkce { throw ValidationError("--redirect-port is for --pkce sign-ins") }
        if redirectPort == 0 { throw ValidationError("--redirect-port must be 1 to 65535") }
    }

    func run() async throws {
        await Terminal.failing { try await signIn() }
    }

    private func signIn() async throws {
        let loader = try transport.makeLoader(trust: try .system(adding: caFile))
        guard let issuer else {
            let server = try await DemoServer.start()
            do {
                try await signIn(issuer: server.baseURL, clientID: clientID ?? "catena-cli", loader: loader, embedded: true)
                await server.stop()
            } catch {
                await server.stop()
                throw error
            }
            return
        }
        guard let url = URL(string: issuer), url.host != nil else { throw CommandFailure("--issuer \"\(issuer)\" is not an absolute URL") }
        try await signIn(issuer: url, clientID: clientID ?? "catena-cli", loader: loader, embedded: false)
    }

    private func signIn(issuer: URL, clientID: String, loader: any HTTPLoader, embedded: Bool) async throws {
        let client = try await OAuth2Client.discover(issuer: issuer, clientID: clientID, loader: loader)
        print("Signing in to \(issuer.absoluteString)\(embedded ? " (embedded demo server)" : "") as \(TerminalText.escaped(clientID))")
        let token: BearerToken
        if pkce {
            token = try await client.signInWithLoopback(scopes: scopes, port: redirectPort ?? 0) { url in
                print("Open this address in a browser to sign in:\n  \(TerminalText.escaped(url.absoluteString))")
                fflush(nil)
                if embedded {
                    // The demo server approves by itself: this command is the browser.
                    print("(the demo server approves catena-cli by itself; following it here)")
                    _ = try await loader.load(APIRequest(url: url))
                } else {
                    Self.openBrowser(url)
                }
            }
        } else {
            token = try await client.signInWithDevice(scopes: scopes) { device in
                print("To sign in, visit  \(TerminalText.escaped(device.verificationURI.absoluteString))")
                print("and enter          \(TerminalText.escaped(device.userCode))")
                if embedded { print("(the demo server approves catena-cli by itself)") }
                print("Waiting for the approval…")
                // Shown now, also when standard output is a pipe (which Swift's print buffers).
                fflush(nil)
            }
        }
        let origins = [issuer].compactMap { $0 } + resources.compactMap(URL.init(string:))
        var seen = Set<String>()
        let login = SavedLogin(
            clientID: clientID, endpoints: client.endpoints, origins: origins.map(SavedLogin.origin(of:)).filter { seen.insert($0).inserted })
        try login.save(name)
        do {
            try SavedLogin.storage.save(token, named: name)
        } catch {
            throw CommandFailure("signed in, but the token cannot be kept: \(error)")
        }
        var facts = [token.scope.map { "scope \(TerminalText.escaped($0))" }, token.refreshToken == nil ? "no refresh token" : "with a refresh token"]
        if let expiresAt = token.expiresAt { facts.insert("expires in \(max(0, Int(expiresAt.timeIntervalSinceNow))) s", at: 0) }
        print("Signed in: the token is kept as \"\(name)\" \(SavedLogin.storageDescription.replacingOccurrences(of: "NAME", with: name))")
        print("           (\(facts.compactMap { $0 }.joined(separator: ", ")))")
        guard embedded else {
            print("Use it with: catena get URL --auth \(name)   (it goes to \(login.origins.map(TerminalText.escaped).joined(separator: ", ")) only)")
            return
        }
        let me = try await loader.load(
            APIRequest(url: issuer.appending(path: "api/protected/me"), headerFields: [.authorization: "Bearer \(token.accessToken)"]))
        print("GET /api/protected/me with it: \(me.status.code) \(TerminalText.escaped(String(decoding: me.body.prefix(200), as: UTF8.self)))")
        print("The embedded demo server stops now, and its tokens with it. To keep one: `catena serve` in one shell,")
        print("then `catena login \(name) --issuer http://127.0.0.1:8080 --client-id catena-cli` and `catena get … --auth \(name)`.")
    }

    /// Opens `url` in the desktop's browser, if there is one; the address is printed anyway.
    static func openBrowser(_ url: URL) {
        #if os(macOS) || os(Linux)
        let process = Process()
        #if os(macOS)
        process.executableURL = URL(fileURLWithPath: "/usr/bin/open")
        #else
        process.executableURL = URL(fileURLWithPath: "/usr/bin/xdg-open")
        #endif
        process.arguments = [url.absoluteString]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try? process.run()
        #endif
    }
}

struct LogoutCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "logout",
        abstract: "Revokes the token kept under NAME at its server (RFC 7009) and forgets it.",
        discussion: SavedLogin.storageHelp
    )

    @Argument(help: "The name the sign-in is kept under.")
    var name: String

    @Option(help: "Trust the CA certificates in this PEM file besides the system's.")
    var caFile: String?

    @Option(help: "The transport: ahc (AsyncHTTPClient) or urlsession.")
    var transport: ConnectionOptions.TransportKind = .ahc

    func run() async throws {
        await Terminal.failing {
            let storage = SavedLogin.storage
            _ = try SavedLogin.file(name)  // checks the name
            // Forgotten first, whatever the server says, and under the lock a refresh by
            // another run holds: a logout must not leave a token behind, nor see one come back.
            let token = try await storage.withExclusiveAccess(named: name) { () throws -> BearerToken? in
                defer { try? storage.removeToken(named: name) }
                return try? storage.token(named: name)
            }
            let login = try? SavedLogin.load(name)
            try? FileManager.default.removeItem(at: try SavedLogin.file(name))
            guard let token else {
                print("Signed out of \(name) (no token was kept)")
                return
            }
            guard let login, login.endpoints.revocation != nil else {
                print("Signed out of \(name): the token is forgotten; it was not revoked (no revocation endpoint known), so it lives until it expires")
                return
            }
            do {
                try await login.client(loader: transport.makeLoader(trust: .system(adding: caFile))).revoke(token)
                print("Signed out of \(name): the token is revoked at the server and forgotten")
            } catch {
                // Some providers refuse a public client's revocation (401): the token is still forgotten here.
                print(
                    "Signed out of \(name): the token is forgotten here, but the server refused to revoke it (\(String(describing: error))), so it stays valid there until it expires"
                )
            }
        }
    }
}
