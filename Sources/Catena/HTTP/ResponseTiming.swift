/// How long the exchange that produced a response took, as the transport measured it.
///
/// Both transports measure the wait for the head and the body from their own
/// callbacks. ``AsyncHTTPClientTransport`` also sees the connection an exchange went
/// over: ``connection`` and ``requestSent``. It cannot tell DNS, TCP and TLS apart
/// (AsyncHTTPClient hands over a connection only once it is ready), so
/// ``ConnectionInfo/readyAfter`` is the three together. URLSession on Linux reports
/// none of it (corelibs never delivers `URLSessionTaskMetrics`). A response that did
/// not come from the network (a mock, a cache hit) has no timing.
public struct ResponseTiming: Sendable, Hashable {
    /// From handing the request to the HTTP client (before any connection set-up, TLS
    /// handshake or request byte) to the arrival of the response head.
    public var timeToFirstByte: Duration
    /// From the head to the body's last byte; nil while a streamed body is still
    /// arriving (``StreamedResponse/collect()`` fills it in).
    public var bodyDuration: Duration?
    /// From handing the request to the HTTP client to its last byte (the head's, or
    /// the body's) being written to the connection; nil where the transport does not see it.
    public var requestSent: Duration?
    /// The connection the exchange went over; nil where the transport does not see it.
    public var connection: ConnectionInfo?
    /// When the head arrived, for the body's duration measured later.
    let headArrived: ContinuousClock.Instant

    /// The timing of an exchange that started at `started`, whose head arrived at
    /// `headArrived` and whose body, if it has, ended at `bodyEnded`.
    package init(
        started: ContinuousClock.Instant, headArrived: ContinuousClock.Instant, bodyEnded: ContinuousClock.Instant? = nil,
        seen: (connection: ConnectionInfo, requestSent: Duration?)? = nil
    ) {
        self.timeToFirstByte = headArrived - started
        self.headArrived = headArrived
        self.bodyDuration = bodyEnded.map { $0 - headArrived }
        self.connection = seen?.connection
        self.requestSent = seen?.requestSent
    }

    /// This timing, with the body ending at `bodyEnded`.
    package func withBody(endedAt bodyEnded: ContinuousClock.Instant) -> ResponseTiming {
        var timing = self
        timing.bodyDuration = bodyEnded - headArrived
        return timing
    }
}
