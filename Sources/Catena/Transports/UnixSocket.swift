/// The Unix domain socket a request goes over instead of a TCP connection: a local
/// daemon's API, such as Docker's at `/var/run/docker.sock`. curl's `--unix-socket`.
///
/// The request keeps its URL (`http://localhost/v1.47/info`): the host names the server
/// in the `Host` field, the path here says where to connect. Redirects stay on the same
/// socket. Set it per request or for a whole environment (``ServerEnvironment/unixSocketPath``):
///
/// ```swift
/// var request = try APIRequest(.get, path: ["v1.47", "info"])
/// request[option: UnixSocket.self] = "/var/run/docker.sock"
/// ```
///
/// `AsyncHTTPClientTransport` connects to the socket (`http+unix://` in its terms);
/// `URLSessionTransport` fails the request with ``CatenaError/Code/invalidRequest``:
/// URLSession has no Unix-socket support.
public enum UnixSocket: RequestOption {
    public static let defaultValue: String? = nil
}
