#if Observability
public import Catena
import Foundation
import HTTPTypes
public import Tracing

/// Opens one client span per call, following the OpenTelemetry conventions for HTTP
/// clients, and propagates the trace to the server through the tracer's instrument
/// (with swift-otel that is W3C `traceparent`).
///
/// Put it at the head of the chain, above `RetryMiddleware` and the auth loaders, so that the
/// span covers the whole call:
///
/// ```swift
/// let chain = TracingMiddleware()
///     --> EnvironmentMiddleware(.init(host: "api.example.com"))
///     --> RetryMiddleware()
///     --> TokenAuthMiddleware(refresh: refresh)
///     --> AsyncHTTPClientTransport()
/// ```
///
/// The span is named after the method ("GET") and carries `http.request.method`,
/// `url.full` (secret query values redacted, see `Redaction`), `url.scheme`,
/// `server.address`, `server.port`, `http.response.status_code`, `error.type` (the
/// status code from 400 on, or the `CatenaError/Code` of a failure, as `timed_out`) and
/// `http.request.resend_count` when the request was sent more than once. What happens
/// inside the call is recorded as **span events**, not child spans, so that a call is
/// one span whatever the chain looks like: `http.retry` (attempt, delay, reason) for
/// each retry, `http.resend` for a send the transport repeated, `catena.token_refresh`
/// (whether this call started it, the wait, the outcome) and `catena.cache` (hit, miss
/// or revalidated). A streamed call's span ends when its body ends.
///
/// The span is the task's current context while the rest of the chain runs, so spans
/// started below (AsyncHTTPClient's own, when its tracing is on) become its children.
/// Header values are never recorded.
public struct TracingMiddleware: HTTPMiddleware {
    private let tracer: (any Tracer)?
    private let spanName: (@Sendable (APIRequest) -> String)?

    /// A tracing loader.
    ///
    /// - Parameters:
    ///   - tracer: the tracer to use; `nil` (the default) reads `InstrumentationSystem.tracer`
    ///     on every call, so the bootstrapped tracer, or one bound with `withTracer`, is used.
    ///   - spanName: the span's name; the default is the method, as the conventions ask
    ///     when there is no low-cardinality route template.
    public init(tracer: (any Tracer)? = nil, spanName: (@Sendable (APIRequest) -> String)? = nil) {
        self.tracer = tracer
        self.spanName = spanName
    }

    public func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        let tracer = self.tracer ?? InstrumentationSystem.tracer
        if tracer is NoOpTracer { return try await next.load(request) }
        let call = SpanCall(tracer: tracer, name: spanName?(request) ?? request.method.rawValue, request: request)
        let outcome: Result<APIResponse, CatenaError> = await InstrumentationContext.$current.withValue(call.span.context) {
            do throws(CatenaError) {
                return .success(try await next.load(call.request))
            } catch {
                return .failure(error)
            }
        }
        switch outcome {
        case .success(let response):
            call.finish(status: response.status.code, sent: response.request, timing: response.timing)
            return response
        case .failure(let error):
            call.finish(error: error)
            throw error
        }
    }

    public func stream(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> StreamedResponse {
        let tracer = self.tracer ?? InstrumentationSystem.tracer
        if tracer is NoOpTracer { return try await next.stream(request) }
        let call = SpanCall(tracer: tracer, name: spanName?(request) ?? request.method.rawValue, request: request)
        let outcome: Result<StreamedResponse, CatenaError> = await InstrumentationContext.$current.withValue(call.span.context) {
            do throws(CatenaError) {
                return .success(try await next.stream(call.request))
            } catch {
                return .failure(error)
            }
        }
        switch outcome {
        case .success(let streamed):
            let status = streamed.status.code, sent = streamed.request, timing = streamed.timing
            streamed.body.whenEnded { bytes, error in
                call.span.attributes["http.response.body.size"] = bytes
                if let error {
                    call.finish(error: error)
                } else {
                    call.finish(status: status, sent: sent, timing: timing?.withBody(endedAt: .now))
                }
            }
            return streamed
        case .failure(let error):
            call.finish(error: error)
            throw error
        }
    }
}

/// One traced call: its span, the request with the context injected and an observer
/// that turns the chain's ``CallEvent``s into span events.
private struct SpanCall: Sendable {
    let span: any Span
    let request: APIRequest
    /// The times the request went out again; counted by the observer, which may run
    /// on any task.
    private let resends: Locked<Int>

    init(tracer: any Tracer, name: String, request: APIRequest) {
        let span = tracer.startSpan(name, context: InstrumentationContext.current ?? .topLevel, ofKind: .client)
        span.attributes["http.request.method"] = request.method.rawValue
        var request = request
        tracer.inject(span.context, into: &request.headerFields, using: HTTPFieldsInjector())
        let resends = Locked(0)
        request.observe(
            CallObserver { event in
                switch event {
                case .retrying(let attempt, let delay, let outcome):
                    resends.withLock { $0 += 1 }
                    span.addEvent(
                        SpanEvent(
                            name: "http.retry",
                            attributes: .with { attributes in
                                attributes["http.request.resend_count"] = attempt - 1
                                attributes["catena.retry.delay_ms"] = delay.milliseconds
                                attributes["catena.retry.reason"] = outcome.label
                            }))
                case .resent(let code):
                    resends.withLock { $0 += 1 }
                    span.addEvent(SpanEvent(name: "http.resend", attributes: .with { $0["catena.resend.reason"] = code.label }))
                case .tokenRefresh(let started, let waited, let succeeded):
                    span.addEvent(
                        SpanEvent(
                            name: "catena.token_refresh",
                            attributes: .with { attributes in
                                attributes["catena.token_refresh.started"] = started
                                attributes["catena.token_refresh.wait_ms"] = waited.milliseconds
                                attributes["catena.token_refresh.succeeded"] = succeeded
                            }))
                case .responseHead(let status, let after):
                    span.addEvent(
                        SpanEvent(
                            name: "http.response.head",
                            attributes: .with { attributes in
                                attributes["http.response.status_code"] = status
                                attributes["catena.time_to_first_byte_ms"] = after.milliseconds
                            }))
                case .bodySent(let bytes):
                    span.attributes["http.request.body.size"] = bytes
                case .connection(let connection):
                    // OpenTelemetry's names (network.*, tls.*) where it has them; the last
                    // exchange's connection is the span's.
                    span.attributes["network.protocol.version"] = connection.httpVersion
                    if let address = connection.remoteAddress { span.attributes["network.peer.address"] = address }
                    if let port = connection.remotePort { span.attributes["network.peer.port"] = port }
                    span.addEvent(
                        SpanEvent(
                            name: "catena.connection",
                            attributes: .with { attributes in
                                attributes["catena.connection.reused"] = connection.isReused
                                if let ready = connection.readyAfter { attributes["catena.connection.ready_ms"] = ready.milliseconds }
                                attributes["network.protocol.version"] = connection.httpVersion
                                if let address = connection.remoteAddress { attributes["network.peer.address"] = address }
                                if let port = connection.remotePort { attributes["network.peer.port"] = port }
                                if let tls = connection.tlsVersion {
                                    attributes["tls.protocol.name"] = "tls"
                                    attributes["tls.protocol.version"] = tls.hasPrefix("TLSv") ? String(tls.dropFirst(4)) : tls
                                }
                                if let cipher = connection.tlsCipherSuite { attributes["tls.cipher"] = cipher }
                            }))
                case .rateLimitWait(let waited, let byRetryAfter):
                    span.addEvent(
                        SpanEvent(
                            name: "catena.rate_limit.wait",
                            attributes: .with { attributes in
                                attributes["catena.rate_limit.wait_ms"] = waited.milliseconds
                                attributes["catena.rate_limit.retry_after"] = byRetryAfter
                            }))
                case .rateLimitHold(let hold):
                    span.addEvent(SpanEvent(name: "catena.rate_limit.hold", attributes: .with { $0["catena.rate_limit.hold_ms"] = hold.milliseconds }))
                case .retryBudgetExhausted:
                    span.addEvent(SpanEvent(name: "catena.retry_budget.exhausted"))
                case .circuit(let state):
                    span.addEvent(SpanEvent(name: "catena.circuit", attributes: .with { $0["catena.circuit.state"] = state.rawValue }))
                case .hedgeSent(let after):
                    span.addEvent(SpanEvent(name: "catena.hedge.sent", attributes: .with { $0["catena.hedge.delay_ms"] = after.milliseconds }))
                case .hedgeWon:
                    span.addEvent(SpanEvent(name: "catena.hedge.won"))
                case .cache(let outcome):
                    span.attributes["catena.cache.outcome"] = outcome.rawValue
                    span.addEvent(SpanEvent(name: "catena.cache", attributes: .with { $0["catena.cache.outcome"] = outcome.rawValue }))
                }
            })
        self.span = span
        self.request = request
        self.resends = resends
    }

    /// Ends the span with the response's status; 4xx and 5xx are errors for a client.
    /// The exchange's phases, when the transport measured them, become attributes.
    func finish(status: Int, sent: APIRequest, timing: ResponseTiming?) {
        describe(sent)
        if let timing {
            span.attributes["catena.time_to_first_byte_ms"] = timing.timeToFirstByte.milliseconds
            if let body = timing.bodyDuration { span.attributes["catena.body_duration_ms"] = body.milliseconds }
        }
        span.attributes["http.response.status_code"] = status
        if status >= 400 {
            span.attributes["error.type"] = "\(status)"
            span.setStatus(SpanStatus(code: .error))
        }
        span.end()
    }

    /// Ends the span with a failure. The error's description is redacted by Catena,
    /// but only its code is recorded, with the code's name as the status message.
    func finish(error: CatenaError) {
        describe(error.response?.request ?? error.request)
        if let status = error.response?.status.code { span.attributes["http.response.status_code"] = status }
        span.attributes["error.type"] = error.code.label
        span.setStatus(SpanStatus(code: .error, message: error.code.rawValue))
        span.end()
    }

    /// The attributes of the request as it was sent, after the environment completed it.
    private func describe(_ sent: APIRequest) {
        span.updateAttributes { attributes in
            attributes["url.full"] = sent.redactedURLString
            if let scheme = sent.scheme { attributes["url.scheme"] = scheme }
            if let host = sent.host {
                attributes["server.address"] = host
                attributes["server.port"] = sent.port ?? (sent.scheme == "http" ? 80 : 443)
            }
            let resends = resends.withLock { $0 }
            if resends > 0 { attributes["http.request.resend_count"] = resends }
        }
    }
}

/// Writes the instrument's propagation fields (`traceparent`, `tracestate`, …) into a
/// request's header fields, replacing any the caller set. Names that are not valid
/// header names are skipped.
struct HTTPFieldsInjector: Injector {
    func inject(_ value: String, forKey key: String, into carrier: inout HTTPFields) {
        guard let name = HTTPField.Name(key) else { return }
        carrier[name] = value
    }
}

extension CatenaError.Code {
    /// The code as an identifier for `error.type` and metric dimensions: "cannot
    /// connect" becomes "cannot_connect".
    var label: String { rawValue.replacingOccurrences(of: " ", with: "_") }
}

extension CallEvent.Outcome {
    /// "503" for a status, the code's label for an error.
    var label: String {
        switch self {
        case .status(let code): "\(code)"
        case .error(let code): code.label
        }
    }
}

extension SpanAttributes {
    /// Attributes set by `build`.
    static func with(_ build: (inout SpanAttributes) -> Void) -> SpanAttributes {
        var attributes = SpanAttributes()
        build(&attributes)
        return attributes
    }
}

extension Duration {
    /// The duration in whole milliseconds, for attributes and labels.
    var milliseconds: Int {
        let (seconds, attoseconds) = components
        guard seconds < Int64.max / 1000 else { return .max }
        return Int(seconds * 1000 + attoseconds / 1_000_000_000_000_000)
    }
}
#endif  // Observability
