import Foundation
import HTTPTypes

extension CatenaError.Code {
    /// Credentials could not be had: a token refresh or a credentials provider failed.
    public static let authenticationFailed = CatenaError.Code(rawValue: "authentication failed")
}

/// Where an auth loader may send credentials: origins, not just hosts.
///
/// Each entry is `"host"` or `"host:port"` (`"[::1]:8080"` for IPv6). A bare host
/// matches the scheme's default port only (443, or 80 over http), so credentials
/// never reach another port of the same machine. Over plain http they go only to a
/// loopback host (`localhost`, `127.x.x.x`, `::1`), where the traffic never leaves the
/// machine, unless `allowsHTTP` says otherwise; to any other host the loader refuses
/// the request rather than sending a secret in clear text. A request to a configured
/// host on a port no entry names is refused too, with an error that says which port
/// to add. An entry that cannot be read (a port that is not a number in 1...65535)
/// matches nothing.
struct CredentialScope: Sendable {
    private struct Origin: Hashable {
        var host: String
        var port: Int?
    }

    private let origins: Set<Origin>
    let allowsHTTP: Bool

    init(_ entries: Set<String>, allowsHTTP: Bool) {
        self.allowsHTTP = allowsHTTP
        origins = Set(entries.compactMap(Self.parse))
    }

    private static func parse(_ entry: String) -> Origin? {
        let entry = entry.lowercased()
        if entry.hasPrefix("[") {  // [v6] or [v6]:port
            guard let close = entry.firstIndex(of: "]") else { return nil }
            let host = String(entry[entry.index(after: entry.startIndex)..<close])
            let rest = entry[entry.index(after: close)...]
            if rest.isEmpty { return Origin(host: host) }
            guard rest.hasPrefix(":"), let port = Int(rest.dropFirst()), (1...65535).contains(port) else { return nil }
            return Origin(host: host, port: port)
        }
        let parts = entry.split(separator: ":", omittingEmptySubsequences: false)
        switch parts.count {
        case 1: return entry.isEmpty ? nil : Origin(host: entry)
        case 2:
            guard !parts[0].isEmpty, let port = Int(parts[1]), (1...65535).contains(port) else { return nil }
            return Origin(host: String(parts[0]), port: port)
        default: return Origin(host: entry)  // a bare IPv6 address
        }
    }

    enum Decision { case send, pass }

    /// Whether `request` may carry the credentials. Throws when the request has no
    /// host (the loader stands before EnvironmentMiddleware) or would carry them over plain
    /// http to a host that is not loopback.
    func decide(_ request: APIRequest, loader: String) throws(CatenaError) -> Decision {
        try requireAbsolute(request, loader: loader)
        guard let host = request.host?.lowercased() else { return .pass }
        let scheme = request.scheme?.lowercased()
        let defaultPort = scheme == "https" ? 443 : scheme == "http" ? 80 : nil
        guard let defaultPort else { return .pass }
        let port = request.port ?? defaultPort
        let sameHost = origins.filter { $0.host == host }
        guard !sameHost.isEmpty else { return .pass }
        guard sameHost.contains(where: { ($0.port ?? defaultPort) == port }) else {
            // Most likely a configuration that predates ports: say so rather than send
            // the request without credentials and leave a bare 401 to puzzle over.
            let configured = sameHost.map { String($0.port ?? defaultPort) }.sorted().joined(separator: ", ")
            throw CatenaError(
                .invalidRequest, request: request,
                detail: "\(loader) holds credentials for \(host) on port \(configured), not \(port): name \"\(host):\(port)\" in its hosts to send them there")
        }
        if scheme == "http", !allowsHTTP, !Self.isLoopback(host) {
            throw CatenaError(
                .invalidRequest, request: request,
                detail: "\(loader) will not send credentials to \(host) over plain http: use https, or allowHTTP: true")
        }
        return .send
    }

    static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host.hasSuffix(".localhost") || host == "::1" { return true }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets[0] == "127" && octets.allSatisfy { UInt8($0) != nil }
    }
}
