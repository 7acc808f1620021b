import Foundation
import HTTPTypes

/// When and how often an ``EventSource`` connects again.
///
/// The wait before a reconnection is the stream's own `retry` time (or
/// `initialDelay` until it sends one), kept within `minimumDelay...maximumDelay`. It
/// doubles with each reconnection in a row that brought no event, up to
/// `maximumDelay`, and gets up to a quarter more at random, so that many clients cut
/// off together do not come back together.
public struct ReconnectPolicy: Sendable {
    /// The wait before reconnecting until the stream sends a `retry` field.
    public var initialDelay: Duration
    /// The shortest wait, whatever the stream asks for: a `retry: 0` from a server that
    /// then closes at once must not become a loop of connections.
    public var minimumDelay: Duration
    /// The longest wait (at most a day).
    public var maximumDelay: Duration
    /// How many reconnections in a row may bring no event before the source gives up
    /// and throws the last failure; nil tries for as long as the task runs.
    public var maximumAttempts: Int?
    /// Whether 429, 502, 503 and 504 are reconnected after (waiting at least a
    /// `Retry-After` in seconds) rather than ending the source. The WHATWG spec ends
    /// it on every status but 200; a service behind a load balancer says 503 for a
    /// moment while it restarts.
    public var reconnectsAfterUnavailable: Bool

    /// A policy; the defaults are those of browsers (3 s), with a one-minute cap.
    public init(
        initialDelay: Duration = .seconds(3), minimumDelay: Duration = .milliseconds(100),
        maximumDelay: Duration = .seconds(60), maximumAttempts: Int? = nil, reconnectsAfterUnavailable: Bool = true
    ) {
        self.initialDelay = initialDelay
        // At most a day: the doubling then stays far from Duration's limits.
        self.minimumDelay = min(max(minimumDelay, .zero), .seconds(86_400))
        self.maximumDelay = min(max(maximumDelay, self.minimumDelay), .seconds(86_400))
        self.maximumAttempts = maximumAttempts
        self.reconnectsAfterUnavailable = reconnectsAfterUnavailable
    }

    /// The wait before reconnection number `attempt` in a row (1 after a connection
    /// that brought events), before jitter.
    func delay(attempt: Int, serverRetry: Duration?, retryAfter: Duration? = nil) -> Duration {
        // The properties are settable: clamp again, so the doubling cannot overflow.
        let cap = min(max(maximumDelay, .zero), .seconds(86_400))
        let floor = min(max(minimumDelay, .zero), cap)
        var delay = min(max(serverRetry ?? initialDelay, floor), cap)
        for _ in 1..<max(attempt, 1) where delay < cap { delay *= 2 }
        delay = min(delay, cap)
        // A server shedding load asked for at least this long: the cap does not cut it
        // (a day does).
        if let retryAfter { delay = max(delay, min(retryAfter, .seconds(86_400))) }
        return delay
    }
}

/// A reconnection an ``EventSource`` is about to make.
public struct Reconnection: Sendable {
    /// Which reconnection in a row without an event this is, from 1.
    public let attempt: Int
    /// How long the source waits before connecting.
    public let delay: Duration
    /// The `Last-Event-ID` the new connection sends ("" sends none).
    public let lastEventID: String
    /// Why the connection ended: nil when the server closed the stream.
    public let reason: CatenaError?
}

/// Server-sent events that survive dropped connections, as a browser's `EventSource`
/// does: when the stream ends or the connection fails, the source waits (see
/// ``ReconnectPolicy``) and connects again with `Last-Event-ID`, and the events go on.
///
/// ```swift
/// let source = EventSource(try .get("api", "events"), loader: chain)
/// for try await event in source {
///     print(event.data)
/// }
/// ```
///
/// It ends (the loop finishes) when the server answers 204 No Content. It throws
/// when the server answers another status than 200 (429, 502, 503 and 504 are
/// reconnected after, unless the policy says otherwise), a 200 that is not
/// `text/event-stream`, a stream that breaks the format's limits, or after
/// `maximumAttempts` reconnections without an event. Connection failures, timeouts
/// (a ``StreamIdleTimeout`` on the request catches a stream gone silent) and a
/// stream the server closes are reconnected after. Leaving the loop or cancelling
/// the task ends the connection at once, also while waiting to reconnect.
///
/// Each loop over the source opens its own connections; every connection goes
/// through `loader`'s chain, so auth, logging and throttling apply to each.
public struct EventSource: AsyncSequence, Sendable {
    public typealias Element = ServerSentEvent
    public typealias Failure = CatenaError

    /// The request each connection sends, before the event-stream headers are added.
    public let request: APIRequest
    let loader: any HTTPLoader
    /// When to reconnect.
    public let policy: ReconnectPolicy
    let maxEventBytes: Int
    let onReconnect: (@Sendable (Reconnection) -> Void)?

    /// A source of the events `request` streams through `loader`.
    ///
    /// - Parameters:
    ///   - request: The stream to open; sent again, with `Last-Event-ID`, on each reconnection.
    ///   - loader: The chain it goes through.
    ///   - policy: When to reconnect.
    ///   - maxEventBytes: The largest event (and line) accepted; larger ones fail with
    ///     ``CatenaError/Code/invalidResponse``.
    ///   - onReconnect: Runs before each wait for a reconnection.
    public init(
        _ request: APIRequest, loader: any HTTPLoader, policy: ReconnectPolicy = ReconnectPolicy(),
        maxEventBytes: Int = 4 << 20, onReconnect: (@Sendable (Reconnection) -> Void)? = nil
    ) {
        self.request = request
        self.loader = loader
        self.policy = policy
        self.maxEventBytes = maxEventBytes
        self.onReconnect = onReconnect
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(source: self)
    }

    /// Reads events across connections.
    public struct AsyncIterator: AsyncIteratorProtocol, Sendable {
        let source: EventSource
        var events: ServerSentEvents.AsyncIterator?
        var lastEventIDSoFar = ""
        var serverRetry: Duration?
        /// Reconnections in a row that brought no event.
        var attempts = 0
        /// How long the next connection waits first; nil for the first one.
        var pendingDelay: Duration?
        var finished = false
        /// How many times this iterator connected again.
        public private(set) var reconnections = 0

        init(source: EventSource) {
            self.source = source
        }

        /// The last event ID so far: what a reconnection sends as `Last-Event-ID`.
        public var lastEventID: String { events?.lastEventID ?? lastEventIDSoFar }

        public mutating func next() async throws(CatenaError) -> ServerSentEvent? {
            while !finished {
                if events == nil {
                    do throws(CatenaError) {
                        try await connect()
                    } catch {
                        try scheduleReconnection(after: error)
                        continue
                    }
                    if finished { return nil }
                }
                do throws(CatenaError) {
                    if let event = try await events?.next() {
                        attempts = 0
                        return event
                    }
                    try scheduleReconnection(after: nil)  // the server closed the stream
                } catch {
                    try scheduleReconnection(after: error)
                }
            }
            return nil
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(CatenaError) -> ServerSentEvent? {
            try await next()
        }

        /// Waits if a reconnection is due, then opens the stream: sets `events`, or
        /// `finished` on a 204.
        private mutating func connect() async throws(CatenaError) {
            var request = source.request
            if let delay = pendingDelay {
                do {
                    try await Task.sleep(for: delay)
                } catch {
                    finished = true
                    throw CatenaError(.cancelled, request: request, detail: "cancelled while waiting to reconnect")
                }
                reconnections += 1
            }
            pendingDelay = nil
            if request.headerFields[.accept] == nil { request.headerFields[.accept] = "text/event-stream" }
            request.headerFields[.cacheControl] = "no-cache"
            request.headerFields[Self.lastEventIDField] = lastEventIDSoFar.isEmpty ? nil : lastEventIDSoFar
            let response = try await source.loader.stream(request)
            switch response.status.code {
            case 200:
                if let mismatch = response.headerFields.contentTypeMismatch(expecting: ["text/event-stream"]) {
                    response.body.cancel()
                    finished = true
                    throw CatenaError(.invalidResponse, request: response.request, response: response.head, detail: mismatch)
                }
                events = ServerSentEvents(
                    body: response.body, request: response.request, maxEventBytes: source.maxEventBytes,
                    lastEventID: lastEventIDSoFar
                ).makeAsyncIterator()
            case 204:
                response.body.cancel()
                finished = true
            default:
                response.body.cancel()
                throw CatenaError(.unacceptableStatus, request: response.request, response: response.head)
            }
        }

        /// Sets up the wait before the next connection after `error` (nil: the stream
        /// ended), or ends the source and throws when `error` is not one to reconnect
        /// after or the attempts are used up.
        private mutating func scheduleReconnection(after error: CatenaError?) throws(CatenaError) {
            if let events {
                lastEventIDSoFar = events.lastEventID
                serverRetry = events.reconnectionTime ?? serverRetry
            }
            events = nil
            var retryAfter: Duration?
            if let error {
                guard !finished, let wait = reconnectable(error) else {
                    finished = true
                    throw error
                }
                retryAfter = wait
            }
            attempts += 1
            if let maximum = source.policy.maximumAttempts, attempts > maximum {
                finished = true
                throw error
                    ?? CatenaError(
                        .connectionLost, request: source.request,
                        detail: "the event stream closed \(maximum) times in a row without an event")
            }
            let delay = source.policy.delay(attempt: attempts, serverRetry: serverRetry, retryAfter: retryAfter)
            let jittered = Swift.min(delay + delay * Double.random(in: 0...0.25), Swift.max(delay, source.policy.maximumDelay))
            pendingDelay = jittered
            source.onReconnect?(Reconnection(attempt: attempts, delay: jittered, lastEventID: lastEventIDSoFar, reason: error))
        }

        /// Whether to reconnect after `error`, and the least wait the server asked for.
        private func reconnectable(_ error: CatenaError) -> Duration?? {
            if Task.isCancelled || error.code == .cancelled { return nil }
            switch error.code {
            case .connectionLost, .timedOut, .cannotConnect:
                return .some(nil)
            case .unacceptableStatus:
                guard source.policy.reconnectsAfterUnavailable, let response = error.response,
                    [429, 502, 503, 504].contains(response.status.code)
                else { return nil }
                // Seconds or an HTTP date, as RetryMiddleware reads it; held to a day.
                let wait = response.headerFields[.retryAfter].flatMap { RetryMiddleware.parseRetryAfter($0, now: Date()) }
                return .some(wait.map { Swift.min($0, .seconds(86_400)) })
            default:
                return nil
            }
        }

        static let lastEventIDField = HTTPField.Name("Last-Event-ID")!
    }
}
