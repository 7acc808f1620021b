import Foundation
public import HTTPTypes

/// Whether and how far a transport follows redirects for a request.
///
/// Both of Catena's transports follow redirects themselves, with the same rules (see
/// ``Redirects``), instead of leaving it to URLSession or AsyncHTTPClient, which
/// disagree: URLSession on Linux drops the body of a 307, forwards every custom
/// header to another host, and brings the process down when a call is cancelled while
/// a redirect is pending.
public enum RedirectPolicy: RequestOption, Sendable, Equatable {
    /// Follow at most this many redirects; one more fails the request with
    /// ``CatenaError/Code/invalidResponse`` ("too many redirects").
    case follow(max: Int)
    /// Never follow: the 3xx response is the answer.
    case never
    /// Follow at most this many redirects while they stay on the request's origin
    /// (scheme, host and port); a redirect elsewhere is returned as the answer.
    case sameOrigin(max: Int)

    /// Five redirects, to any origin (credentials stripped when it changes).
    public static let defaultValue: RedirectPolicy = .follow(max: 5)
}

/// Header fields that belong to the origin a request was built for and must never be
/// sent to another one. ``EnvironmentMiddleware`` adds the names of the fields it adds; add
/// your own for headers you set by hand.
public enum OriginBoundHeaders: RequestOption {
    public static let defaultValue: Set<HTTPField.Name> = []
}

/// The redirect rules both transports apply.
///
/// - 301 and 302 turn a POST into a GET without a body (what browsers and curl do);
///   303 turns anything but HEAD into a GET without a body; 307 and 308 keep the
///   method and the body, produced afresh (a file or stream is opened again).
/// - A redirect to another origin (scheme, host or port differs) strips
///   `Authorization`, `Proxy-Authorization`, `Cookie`, every header the default
///   redaction or the request's ``Redaction`` option treats as secret, and every ``OriginBoundHeaders`` name (the environment's API
///   key, say). A downgrade from https to http is stripped the same way, and a
///   redirect that would resend a body over plain http is not followed: it is the answer.
/// - A `Location` that is missing or unusable leaves the 3xx as the answer; one that
///   names a scheme other than http or https fails with
///   ``CatenaError/Code/invalidResponse``. User information in a `Location` is dropped.
/// - The request's timeout covers the whole exchange, redirects included. A hop is
///   sent only while time is left: a call whose timeout is already spent (zero, say)
///   fails with ``CatenaError/Code/timedOut`` before anything is sent, whatever the policy.
public enum Redirects {
    /// The status codes that are redirects.
    public static func isRedirect(_ status: HTTPResponse.Status) -> Bool {
        switch status.code {
        case 301, 302, 303, 307, 308: true
        default: false
        }
    }

    /// Sends `request` with `send`, following redirects as its ``RedirectPolicy`` says.
    ///
    /// `send` gets each hop and the time left of the request's total timeout
    /// (`request.timeout ?? defaultTimeout`); it must not follow redirects itself.
    public static func follow(
        _ request: APIRequest, defaultTimeout: Duration,
        send: (APIRequest, Duration) async throws(CatenaError) -> APIResponse
    ) async throws(CatenaError) -> APIResponse {
        try await follow(request, defaultTimeout: defaultTimeout, head: { $0 }, discard: { _ in }, send: send)
    }

    /// ``follow(_:defaultTimeout:send:)`` for answers of any kind, such as streams:
    /// `head` gives an answer's status and header fields, `discard` lets go of a
    /// redirect's answer once it is followed.
    public static func follow<Answer>(
        _ request: APIRequest, defaultTimeout: Duration,
        head: (Answer) -> APIResponse, discard: (Answer) -> Void,
        send: (APIRequest, Duration) async throws(CatenaError) -> Answer
    ) async throws(CatenaError) -> Answer {
        // Across each wait only the hop is kept; what follows an answer is decided in
        // `@inline(never)` synchronous code (Architecture: "Async frames stay small").
        var hop = request
        let timeout = try prepare(&hop, defaultTimeout: defaultTimeout)
        let start = ContinuousClock.now
        var followed = 0
        while true {
            // What a retried operation may send again depends on what went out.
            if !IdempotencyKey.idempotentMethods.contains(hop.method) { IdempotencyKey.attempt?.noteSending(hop) }
            let answer = try await send(hop, try timeLeft(of: timeout, since: start, hop: hop, followed: followed))
            guard try advance(&hop, after: answer, followed: &followed, head: head, discard: discard) else { return answer }
        }
    }

    /// Gives `hop` its idempotency key, when it gets one (a call without RetryMiddleware above
    /// gets it here, once for all its redirects), and returns its total timeout.
    @inline(never)
    private static func prepare(_ hop: inout APIRequest, defaultTimeout: Duration) throws(CatenaError) -> Duration {
        _ = try hop.applyIdempotencyKey()
        return hop.timeout ?? defaultTimeout
    }

    /// What is left of `timeout` since `start`; `timedOut` when nothing is.
    @inline(never)
    private static func timeLeft(of timeout: Duration, since start: ContinuousClock.Instant, hop: APIRequest, followed: Int) throws(CatenaError) -> Duration {
        let left = timeout - (ContinuousClock.now - start)
        guard left > .zero else {
            throw CatenaError(.timedOut, request: hop, detail: "no complete answer within \(timeout) (after \(followed) redirects)")
        }
        return left
    }

    /// Makes `hop` the request to send after `answer`, as the hop's ``RedirectPolicy``
    /// says, and counts it in `followed`; false when `answer` is the answer. An answer
    /// that is followed, or that fails, is discarded.
    @inline(never)
    private static func advance<Answer>(
        _ hop: inout APIRequest, after answer: Answer, followed: inout Int, head: (Answer) -> APIResponse, discard: (Answer) -> Void
    ) throws(CatenaError) -> Bool {
        let response = head(answer)
        // Most answers are not 3xx: there is nothing to follow, and nothing to check of an
        // unfollowed redirect (`ContentCoding.checkUnfollowed` looks at 3xx only).
        guard (300...399).contains(response.status.code) else { return false }
        let policy = hop[option: RedirectPolicy.self]
        let limit: Int
        switch policy {
        case .never:
            try checkUnfollowed(answer, response, discard: discard, request: hop)
            return false
        case .follow(let max), .sameOrigin(let max): limit = Swift.max(0, max)
        }
        let next: APIRequest?
        do {
            next = try nextRequest(after: response, from: hop)
        } catch {
            discard(answer)
            throw error
        }
        var leavesOrigin = false
        if case .sameOrigin = policy, let next, !hop.hasSameOrigin(as: next) { leavesOrigin = true }
        guard let next, !leavesOrigin else {
            try checkUnfollowed(answer, response, discard: discard, request: hop)
            return false
        }
        discard(answer)
        guard followed < limit else {
            throw CatenaError(.invalidResponse, request: hop, response: response, detail: "too many redirects (more than \(limit))")
        }
        followed += 1
        hop = next
        return true
    }

    /// A redirect handed over unfollowed has a body like any answer: one in a coding
    /// the transport did not decode fails (transports check every other status at the
    /// head, and a redirect's only once it is known not to be followed).
    private static func checkUnfollowed<Answer>(
        _ answer: Answer, _ response: APIResponse, discard: (Answer) -> Void, request: APIRequest
    ) throws(CatenaError) {
        do throws(CatenaError) {
            try ContentCoding.checkUnfollowed(response, request: request)
        } catch {
            discard(answer)
            throw error
        }
    }

    /// The request a redirect response asks for, or nil when `response` is not a
    /// redirect or names no usable location.
    public static func nextRequest(after response: APIResponse, from request: APIRequest) throws(CatenaError) -> APIRequest? {
        guard isRedirect(response.status), let location = response.headerFields[.location],
            let base = try? request.url(),
            let target = URL(string: location.trimmingCharacters(in: .whitespaces), relativeTo: base)?.absoluteURL,
            var components = URLComponents(url: target, resolvingAgainstBaseURL: true)
        else { return nil }
        guard let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw CatenaError(
                .invalidResponse, request: request, response: response,
                detail: "a \(response.status.code) redirect to a \(components.scheme ?? "relative") URL, which is neither http nor https")
        }
        guard let host = components.host, !host.isEmpty else { return nil }
        components.user = nil
        components.password = nil
        components.fragment = nil
        guard let url = components.url else { return nil }

        let code = response.status.code
        let becomesGET = (code == 303 && request.method != .head) || ((code == 301 || code == 302) && request.method == .post)
        // A body resent from https to http would go out in clear text: the redirect is the answer.
        if !becomesGET, !request.body.isEmpty, request.scheme == "https", scheme == "http" { return nil }
        var next = APIRequest(request.method, url: url, headerFields: request.headerFields, body: request.body)
        guard next.host != nil else { return nil }  // "https://[]": no usable host
        next.options = request.options
        if becomesGET {
            next.method = .get
            next.body = .empty
            // The key named the request that was sent, not the GET that follows it.
            for name: HTTPField.Name in [.contentType, .contentLength, .contentEncoding, .contentLanguage, .contentLocation, .idempotencyKey] {
                next.headerFields[name] = nil
            }
        }
        if !request.hasSameOrigin(as: next) {
            let bound = request[option: OriginBoundHeaders.self]
            let redaction = Redaction.effective(for: request)
            next.headerFields = HTTPFields(
                next.headerFields.filter { field in
                    !(bound.contains(field.name) || redaction.isSecretHeader(field.name) || field.name == .proxyAuthorization
                        || field.name == .idempotencyKey)
                })
        }
        return next
    }
}

extension APIRequest {
    /// Whether both requests go to the same scheme, host and port (default ports
    /// filled in).
    func hasSameOrigin(as other: APIRequest) -> Bool {
        func port(_ request: APIRequest) -> Int? {
            request.port ?? (request.scheme == "https" ? 443 : request.scheme == "http" ? 80 : nil)
        }
        return scheme?.lowercased() == other.scheme?.lowercased() && host?.lowercased() == other.host?.lowercased() && port(self) == port(other)
    }
}
