/// How long the exchange that produced a response took, as the transport measured it.
///
/// Both transports measure the same two phases from their own callbacks: the wait for
/// the head, and the body. Neither AsyncHTTPClient 1.37 nor URLSession on Linux tells
/// the connect and TLS phases apart (see the README's observability section), so a
/// new connection's set-up is part of ``timeToFirstByte``. A response that did not
/// come from the network (a mock, a cache hit) has no timing.
public struct ResponseTiming: Sendable, Hashable {
    /// From handing the request to the HTTP client (before any connection set-up, TLS
    /// handshake or request byte) to the arrival of the response head.
    public var timeToFirstByte: Duration
    /// From the head to the body's last byte; nil while a streamed body is still
    /// arriving (``StreamedResponse/collect()`` fills it in).
    public var bodyDuration: Duration?
    /// When the head arrived, for the body's duration measured later.
    let headArrived: ContinuousClock.Instant

    /// The timing of an exchange that started at `started`, whose head arrived at
    /// `headArrived` and whose body, if it has, ended at `bodyEnded`.
    package init(started: ContinuousClock.Instant, headArrived: ContinuousClock.Instant, bodyEnded: ContinuousClock.Instant? = nil) {
        self.timeToFirstByte = headArrived - started
        self.headArrived = headArrived
        self.bodyDuration = bodyEnded.map { $0 - headArrived }
    }

    /// This timing, with the body ending at `bodyEnded`.
    package func withBody(endedAt bodyEnded: ContinuousClock.Instant) -> ResponseTiming {
        var timing = self
        timing.bodyDuration = bodyEnded - headArrived
        return timing
    }
}
