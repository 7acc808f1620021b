// Trusting a private certificate authority through Catena's own API, over HTTP/2.
// Runs against the embedded demo server over TLS: `swift run --enable-all-traits HTTPS`.

// snippet.hide
import CatenaDemoServer
import Foundation

// A throwaway CA and a leaf for 127.0.0.1, as `catena serve --tls` makes them.
let authority = try DemoCertificateAuthority()
let server = try await DemoServer.start(tls: DemoTLS(certificate: try authority.issue()))
let caPEM = authority.certificatePEM
// snippet.show
import Catena
import CatenaAsyncHTTPClient

// snippet.trust
// The CA's PEM, say from a file: `String(contentsOfFile: "ca.pem", encoding: .utf8)`.
let trust = try ServerTrust(additionalRootsPEM: caPEM)  // besides the system's roots
let transport = try AsyncHTTPClientTransport(trust: trust)  // throws what it cannot check
let chain = EnvironmentMiddleware(ServerEnvironment(host: "127.0.0.1", port: server.port)) --> transport
// snippet.end

// snippet.call
// HTTP/2 where the server offers it (ALPN); many calls share one connection.
let answers = try await withThrowingTaskGroup(of: Int.self) { group in
    for id in 1...12 {
        group.addTask { try await chain.load(try .get("api", "users", String(id))).status.code }
    }
    var codes: [Int] = []
    for try await code in group { codes.append(code) }
    return codes
}
print(answers)  // twelve 200s
// snippet.end

// snippet.untrusted
do {
    _ = try await (EnvironmentMiddleware(ServerEnvironment(host: "127.0.0.1", port: server.port)) --> AsyncHTTPClientTransport())
        .load(try .get("api", "users", "2"))
} catch {
    print(error.code)  // untrustedServer: the system's roots do not know the demo CA
}
// snippet.end

// snippet.hide
// A second server whose leaf comes from an intermediate of the same authority.
let intermediate = try authority.intermediate()
let chained = try await DemoServer.start(tls: DemoTLS(certificate: try intermediate.issue()))
let rootDER = authority.certificateDER
let intermediateDER = intermediate.certificateDER
// snippet.show

// snippet.pin
// Pinning by trust anchor: your root alone, the system's left out. A chain through
// its intermediates is accepted; any other server fails before a byte is sent.
let pinned = try AsyncHTTPClientTransport(trust: ServerTrust(additionalRoots: [rootDER], excludesSystemRoots: true))
let viaIntermediate = EnvironmentMiddleware(ServerEnvironment(host: "127.0.0.1", port: chained.port)) --> pinned
print(try await viaIntermediate.load(try .get("api", "users", "2")).status.code)  // 200

// An intermediate (or a leaf) cannot be the anchor here: refused at setup.
do {
    _ = try AsyncHTTPClientTransport(trust: ServerTrust(additionalRoots: [intermediateDER], excludesSystemRoots: true))
} catch {
    print(error)  // "... is not a root ...: trust the root that issued it"
}
// snippet.end

// snippet.hide
let keyedLeaf = try authority.issue()
let keyed = try await DemoServer.start(tls: DemoTLS(certificate: keyedLeaf))
let leafKey = keyedLeaf.publicKeySHA256  // what `openssl x509 -pubkey | … | base64` prints
let backupKey = Data(repeating: 1, count: 32).base64EncodedString()
// snippet.show

// snippet.pinkey
// Pinning by public key: the server's leaf must carry one of these keys (base64
// SHA-256 of its SubjectPublicKeyInfo), checked on each new connection before any
// byte of a request. Name a backup key, so a rotation does not lock clients out.
let keyPinned = try AsyncHTTPClientTransport(
    trust: ServerTrust(additionalRoots: [rootDER], publicKeyPins: ["127.0.0.1": [leafKey, "sha256//" + backupKey]]))
let toKeyed = EnvironmentMiddleware(ServerEnvironment(host: "127.0.0.1", port: keyed.port)) --> keyPinned
print(try await toKeyed.load(try .get("api", "users", "2")).status.code)  // 200; another key: untrustedServer
// snippet.end

// snippet.proxy
// Through the company's proxy, as curl would go: HTTPS_PROXY, https_proxy, NO_PROXY…
// from the environment, or named. CONNECT keeps TLS end to end.
let proxies =
    try ProxySettings.environment()
    ?? ProxySettings("http://user:secret@proxy.example:3128", bypass: ProxyBypass("localhost,127.0.0.1,.internal.example"))
let proxied = try AsyncHTTPClientTransport(trust: .system, proxy: proxies)
print(proxies)  // the password shows as •••
// snippet.end

// snippet.socket
// A local daemon's API over a Unix domain socket: the URL names the host, the
// environment the socket (Docker's, say, at /var/run/docker.sock).
let socketPath = FileManager.default.temporaryDirectory.appendingPathComponent("catena-snippet.sock").path
let daemon = try await DemoServer.start(unixSocket: socketPath)
let local = EnvironmentMiddleware(ServerEnvironment(scheme: "http", host: "localhost", unixSocketPath: socketPath)) --> proxied
print(try await local.load(try .get("api", "users", "2")).status.code)  // 200, never through the proxy
// snippet.end

// snippet.hide
try await pinned.shutdown()
try await keyPinned.shutdown()
try await proxied.shutdown()
try await transport.shutdown()
await daemon.stop()
await keyed.stop()
await chained.stop()
await server.stop()
