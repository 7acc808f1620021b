/// How long the exchange that produced a response took, as the transport measured it.
///
/// Both transports measure the wait for the head and the body from their own
/// callbacks. `AsyncHTTPClientTransport` also sees the connection an exchange went
/// over: ``connection`` and ``requestSent``. It cannot tell DNS, TCP and TLS apart
/// (AsyncHTTPClient hands over a connection only once it is ready), so
/// ``ConnectionInfo/readyAfter`` is the three together. Apple's URLSession reports
/// them from `URLSessionTaskMetrics` when it delivers the metrics before completing the
/// task (a buffered response; a stream's head is handed over before); corelibs on
/// Linux never delivers them. A response that did not come from the network (a mock,
/// a cache hit) has no timing.
public struct ResponseTiming: Sendable, Hashable {
    /// From handing the request to the HTTP client (before any connection set-up, TLS
    /// handshake or request byte) to the arrival of the response head.
    public var timeToFirstByte: Duration
    /// From the head to the body's last byte; nil while a streamed body is still
    /// arriving (``StreamedResponse/collect()`` fills it in).
    public var bodyDuration: Duration?
    /// From handing the request to the HTTP client to its last part (the head, or the
    /// body's end) being passed to the connection's encoder, before TLS and the socket;
    /// nil where the transport does not see it, or when the response's head came first.
    /// Apple's URLSession: `requestEndDate` less `fetchStartDate`, once the bytes went out.
    public var requestSent: Duration? {
        get { path?.requestSent }
        set { path = Path.of(connection: connection, requestSent: newValue) }
    }
    /// The connection the exchange went over; nil where the transport does not see it.
    public var connection: ConnectionInfo? {
        get { path?.connection }
        set { path = Path.of(connection: newValue, requestSent: requestSent) }
    }
    /// When the head arrived, for the body's duration measured later.
    let headArrived: ContinuousClock.Instant
    /// The connection and the send, boxed: every response carries its timing through the
    /// chain's async frames, which must stay small (Architecture: "Async frames stay small").
    private var path: Path?

    private final class Path: Sendable, Hashable {
        let connection: ConnectionInfo?
        let requestSent: Duration?

        init(connection: ConnectionInfo?, requestSent: Duration?) {
            self.connection = connection
            self.requestSent = requestSent
        }

        /// Nil for neither, so a timing equals itself whichever way its fields were set.
        static func of(connection: ConnectionInfo?, requestSent: Duration?) -> Path? {
            connection == nil && requestSent == nil ? nil : Path(connection: connection, requestSent: requestSent)
        }

        static func == (lhs: Path, rhs: Path) -> Bool { lhs.connection == rhs.connection && lhs.requestSent == rhs.requestSent }
        func hash(into hasher: inout Hasher) {
            hasher.combine(connection)
            hasher.combine(requestSent)
        }
    }

    /// The timing of an exchange that started at `started`, whose head arrived at
    /// `headArrived` and whose body, if it has, ended at `bodyEnded`.
    package init(
        started: ContinuousClock.Instant, headArrived: ContinuousClock.Instant, bodyEnded: ContinuousClock.Instant? = nil,
        seen: (connection: ConnectionInfo, requestSent: Duration?)? = nil
    ) {
        self.timeToFirstByte = headArrived - started
        self.headArrived = headArrived
        self.bodyDuration = bodyEnded.map { $0 - headArrived }
        self.path = seen.flatMap { Path.of(connection: $0.connection, requestSent: $0.requestSent) }
    }

    /// This timing, with the body ending at `bodyEnded`.
    package func withBody(endedAt bodyEnded: ContinuousClock.Instant) -> ResponseTiming {
        var timing = self
        timing.bodyDuration = bodyEnded - headArrived
        return timing
    }
}
