/// The connection an exchange went over, as the transport saw it: curl's
/// `%{num_connects}`, `%{remote_ip}`, `%{http_version}` and `%{time_appconnect}`,
/// OkHttp's `EventListener`, Go's `httptrace`.
///
/// Reported on the response (``ResponseTiming/connection``) and as
/// ``CallEvent/connection(_:)`` once per exchange, so a redirect or a retry that opened
/// another connection shows as another event.
public struct ConnectionInfo: Sendable, Hashable {
    /// Whether an earlier exchange opened the connection (it came from the pool).
    public var isReused: Bool
    /// For a new connection, from handing the request to the HTTP client to the
    /// connection being ready to carry it: waiting for the pool, DNS, the TCP connect,
    /// a proxy's tunnel and the TLS handshake together, which AsyncHTTPClient does not
    /// tell apart (Apple's URLSession: from the fetch's start to `connectEndDate`). Nil
    /// for a reused connection.
    public var readyAfter: Duration?
    /// The address the connection reached (`127.0.0.1`, `::1`): the server's, or the
    /// proxy's when it went through one. Nil over a Unix socket.
    public var remoteAddress: String?
    /// The port the connection reached; nil over a Unix socket.
    public var remotePort: Int?
    /// The connection's own port on this side (curl's `%{local_port}`); one connection's
    /// exchanges share it. Nil over a Unix socket.
    public var localPort: Int?
    /// The HTTP version spoken: `"1.1"` or `"2"` (agreed by ALPN over TLS), or `"3"`
    /// over QUIC with Apple's URLSession.
    public var httpVersion: String
    /// The TLS version agreed (`"TLSv1.3"`); nil without TLS.
    public var tlsVersion: String?
    /// The TLS cipher suite agreed, by its IANA name (`"TLS_AES_128_GCM_SHA256"`), or
    /// its number (`"0xC013"`) for a suite Catena does not name; nil where the
    /// transport does not show it (AsyncHTTPClient's NIOSSL does not; Apple's
    /// URLSession does).
    public var tlsCipherSuite: String?

    /// A connection as a transport saw it.
    public init(
        isReused: Bool, readyAfter: Duration? = nil, remoteAddress: String? = nil, remotePort: Int? = nil, localPort: Int? = nil,
        httpVersion: String,
        tlsVersion: String? = nil, tlsCipherSuite: String? = nil
    ) {
        self.isReused = isReused
        self.readyAfter = readyAfter
        self.remoteAddress = remoteAddress
        self.remotePort = remotePort
        self.localPort = localPort
        self.httpVersion = httpVersion
        self.tlsVersion = tlsVersion
        self.tlsCipherSuite = tlsCipherSuite
    }
}
