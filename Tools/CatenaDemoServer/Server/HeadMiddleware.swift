#if DemoServer
import Hummingbird
import Synchronization

/// Answers HEAD with the GET's head and no body, as real servers do. Over HTTP/1.1
/// Hummingbird drops a HEAD response's body itself; over HTTP/2 it sent the DATA
/// frames, and the connection died with every stream on it (found by the transport
/// suite over h2: a HEAD to /api/echo failed every request sharing its connection).
struct HeadMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response = try await next(request, context)
        guard request.method == .head else { return response }
        let length = response.headers[.contentLength]
        response.body = ResponseBody()
        // The length a GET would have, as RFC 9110 allows for HEAD.
        response.headers[.contentLength] = length
        return response
    }
}

/// Counts every request a server reads, before any route: tests check that a request
/// was never sent (a failed public-key pin, a proxy that was bypassed).
struct CountingMiddleware<Context: RequestContext>: RouterMiddleware {
    let tally: RequestTally

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        tally.count.add(1, ordering: .relaxed)
        return try await next(request, context)
    }
}

/// The number of requests one server has read.
final class RequestTally: Sendable {
    let count = Atomic<Int>(0)
}
#endif  // DemoServer
