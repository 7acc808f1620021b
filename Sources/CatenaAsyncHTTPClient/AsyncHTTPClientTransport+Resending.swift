#if AsyncHTTPClient
import Catena

/// Sending an idempotent request again when it failed before any response head.
extension AsyncHTTPClientTransport {
    /// Runs `attempt` with the time left, again when it fails before any response head
    /// (most likely on a reused connection that an earlier response left broken; each
    /// such connection closes on its failure), up to ``attemptsBeforeAnyHead`` times.
    ///
    /// When such a failure leaves no time for another attempt, the request has timed
    /// out: it would have been sent again, and the failure (someone else's broken
    /// connection, drawn after waiting for a free one) is what the error's underlying
    /// error keeps.
    static func resendingBeforeHead<Answer>(
        _ request: APIRequest, within left: Duration, _ attempt: (Duration) async throws(CatenaError) -> Answer
    ) async throws(CatenaError) -> Answer {
        let start = ContinuousClock.now
        var failures: [CatenaError] = []
        while true {
            do throws(CatenaError) {
                return try await attempt(left - (ContinuousClock.now - start))
            } catch {
                try resendOrThrow(request, after: error, failures: &failures, left: left - (ContinuousClock.now - start), within: left)
            }
        }
    }

    /// After an attempt failed with `error`: returns when the request is to be sent
    /// again, throws the call's failure otherwise. `@inline(never)`, so its temporaries
    /// take no room in the async frame of every call.
    @inline(never)
    private static func resendOrThrow(
        _ request: APIRequest, after error: CatenaError, failures: inout [CatenaError], left: Duration, within timeout: Duration
    ) throws(CatenaError) {
        guard mayResend(request, after: error) else { throw error }
        failures.append(error)
        guard failures.count < attemptsBeforeAnyHead else { throw mostTelling(failures) }
        guard left > .zero else {
            throw CatenaError(
                .timedOut, request: request, underlyingError: error,
                detail: "no response head within \(timeout); the last attempt failed before its head (\(error.detail ?? "\(error.code)"))")
        }
        request.report(.resent(after: error.code))
    }

    /// The failure that says most about the server's answer to this request, of
    /// attempts that all failed before a head: the code most of them ended with, the
    /// latest of a tie. Any one attempt may have drawn a pooled connection that another
    /// response left broken (its bytes then fail to parse) or that the server had closed,
    /// and each such connection closes on its failure: a server that answers this request
    /// with garbage, or by closing the connection, does so on most attempts. Two such
    /// leftovers drawn by one call outvote the server's answer; nothing AsyncHTTPClient
    /// reports tells a reused connection from a new one.
    static func mostTelling(_ failures: [CatenaError]) -> CatenaError {
        var best = failures[failures.count - 1]
        var bestCount = 0
        for candidate in failures.reversed() {
            let count = failures.count { $0.code == candidate.code }
            if count > bestCount { (best, bestCount) = (candidate, count) }
        }
        return best
    }

    /// How many times an idempotent request is sent when every attempt fails before
    /// any response head: more than one broken connection can sit in the pool at once.
    static let attemptsBeforeAnyHead = 3

    /// Whether `request` may be sent again after `error`: it is idempotent, and the
    /// failure came before any response head (the connection closed, or its bytes did
    /// not parse as a response).
    static func mayResend(_ request: APIRequest, after error: CatenaError) -> Bool {
        guard error.code != .cancelled, !Task.isCancelled, error.response == nil, error.underlyingError is PreHeadFailure else { return false }
        return [.get, .head, .options, .put, .delete, .trace].contains(request.method)
    }

    /// Marks a failure that happened before the response head arrived.
    struct PreHeadFailure: Error, CustomStringConvertible {
        let error: any Error
        var description: String { String(describing: error) }
    }
}
#endif  // AsyncHTTPClient
