#if AsyncHTTPClient
import AsyncHTTPClient
import Catena
import Foundation
import HTTPTypes
import NIOCore
import NIOFoundationCompat
import NIOHTTP1

/// Buffered calls through AsyncHTTPClient's delegate API: head and body parts arrive on
/// the event loop and are gathered there, and the call's task waits once, for the
/// whole answer.
///
/// Next to `execute` + `collect`, this spends no task and no actor per call
/// (AsyncHTTPClient's async `execute` registers each request through a `Task` on an
/// actor), no hop per body part, and no task and timer of Catena's for the body's
/// deadline: the delegate API's deadline covers the whole exchange, body included.
extension AsyncHTTPClientTransport {
    /// Whether `request` can take the delegate path: an in-memory body (or none), whose
    /// progress nobody watches, and an answer kept in memory.
    static func takesDelegatePath(_ request: APIRequest) -> Bool {
        request.body.stream == nil && request[option: UploadProgress.self] == nil && request[option: DownloadDestination.self] == nil
    }

    /// One exchange, no redirects followed, gathered on the event loop.
    ///
    /// The call's task waits once, and holds nothing across that wait but its delegate:
    /// the request is built and the answer made in synchronous code (Architecture:
    /// "Async frames stay small"). The request is handed to AsyncHTTPClient on an event
    /// loop, in one hop (Architecture: "One hop onto the event loop").
    func sendGathered(_ request: APIRequest, timeout: Duration) async throws(CatenaError) -> APIResponse {
        let delegate = try GatheringDelegate(transport: self, request: request, timeout: timeout)
        await withTaskCancellationHandler {
            await withUnsafeContinuation { delegate.start(resuming: $0) }
        } onCancel: {
            delegate.cancel()
        }
        return try delegate.answer()
    }

    /// `request` as the delegate API takes it, its body (in memory: the delegate paths
    /// take no streamed body) produced afresh; `cancelled` when the calling task is.
    func delegateRequest(_ request: APIRequest, timeout: Duration) throws(CatenaError) -> HTTPClient.Request {
        let outgoing: HTTPClient.Request
        do {
            outgoing = try HTTPClient.Request(
                url: try targetURL(of: request), method: HTTPMethod(rawValue: request.method.rawValue),
                headers: try headers(for: request),
                body: try request.inMemoryBodyData().map { .bytes($0) })
        } catch let error as CatenaError {
            throw error
        } catch {
            throw Self.map(error, request: request, timeout: timeout, limit: .max)
        }
        guard !Task.isCancelled else { throw CatenaError(.cancelled, request: request) }
        return outgoing
    }
}

/// Gathers one response on the task's event loop: checks the head as the streaming
/// path does, and keeps the body parts up to the size limit.
///
/// The call's task holds only this delegate across its one wait: the request is built
/// in `init` and the answer made in `answer()`, both synchronous.
///
/// `@unchecked Sendable`: its state is touched on `loop` only, one access after another,
/// until the task's future completes. `start` and `cancel` run there, and the task is
/// started with `loop` as its event loop, where AsyncHTTPClient calls every method of a
/// delegate (the client Catena configures follows no redirects, which would start a
/// task of their own). The outcome is stored on `loop` before the caller is resumed;
/// `answer()` reads it after that resumption, which orders the two. `init` runs before
/// any of this.
final class GatheringDelegate: HTTPClientResponseDelegate, @unchecked Sendable {
    struct Response: Sendable {
        var head: HTTPResponseHead
        var body: ByteBuffer
        var headArrived: ContinuousClock.Instant
    }

    private let transport: AsyncHTTPClientTransport
    private let request: APIRequest
    private let limit: Int
    private let timeout: Duration
    /// The request to send; let go of once handed to AsyncHTTPClient.
    private var outgoing: HTTPClient.Request?
    private let deadline: NIODeadline
    /// The event loop the exchange is started on and reports on.
    private let loop: any EventLoop
    /// The exchange, once started; for `cancel()`.
    private var task: HTTPClient.Task<Response>?
    private var cancelled = false
    /// The exchange's outcome, once known: set on `loop` before the caller is resumed.
    private var outcome: Result<Response, any Error>?
    /// When the request was handed to AsyncHTTPClient: once built, as `send` measures it.
    private let started: ContinuousClock.Instant
    private var head: HTTPResponseHead?
    private var headArrived = ContinuousClock.now
    private var body: ByteBuffer?

    /// A delegate for one exchange of `request` through `transport`'s client, the
    /// request built (`cancelled` when the calling task is).
    init(transport: AsyncHTTPClientTransport, request: APIRequest, timeout: Duration) throws(CatenaError) {
        self.outgoing = try transport.delegateRequest(request, timeout: timeout)
        self.transport = transport
        self.request = request
        self.limit = request[option: MaximumResponseSize.self]
        self.timeout = timeout
        self.deadline = NIODeadline.now() + TimeAmount(timeout)
        self.started = .now
        // Last: a delegate made is always started, and its start always ends the call.
        self.loop = transport.startingLoop()
    }

    /// Starts the exchange on `loop` and resumes `continuation` once it has an outcome,
    /// once: a call cancelled before that fails with `HTTPClientError.cancelled` and is
    /// never sent. Started there, the futures attached to the task cost no hop each.
    ///
    /// The continuation is unchecked (no canary object per call): each path below
    /// resumes it exactly once, either at once or from the task's future, which
    /// completes exactly once, also when AsyncHTTPClient refuses the request.
    func start(resuming continuation: UnsafeContinuation<Void, Never>) {
        loop.execute { [self] in
            let outgoing = self.outgoing
            // Not kept past the start: it may carry credentials.
            self.outgoing = nil
            guard !cancelled, let outgoing else {
                outcome = .failure(HTTPClientError.cancelled)
                transport.callEnded()
                return continuation.resume()
            }
            let task = transport.client(for: request).execute(
                request: outgoing, delegate: self, eventLoop: transport.eventLoopPreference(startedOn: loop), deadline: deadline)
            assert(task.eventLoop === loop, "the delegate's state lives on its loop")
            self.task = task
            task.futureResult.whenComplete { [self] result in
                outcome = result
                transport.callEnded()
                continuation.resume()
            }
        }
    }

    /// Cancels the exchange, or keeps it from starting. From any thread.
    func cancel() {
        loop.execute { [self] in
            cancelled = true
            task?.cancel()
        }
    }

    /// The call's answer, or its error, once the caller was resumed. `@inline(never)`,
    /// so its temporaries take no room in the caller's async frame.
    @inline(never)
    func answer() throws(CatenaError) -> APIResponse {
        switch outcome {
        case .success(let gathered): return response(gathered)
        case .failure(let error): throw failure(error)
        case nil: preconditionFailure("the answer is read once the exchange has ended")
        }
    }

    /// The answer `gathered` makes, reported to the request's observers; on the
    /// caller's task, not the event loop: an observer that takes its time must not hold
    /// up every connection on that loop.
    private func response(_ gathered: Response) -> APIResponse {
        let seen = transport.connection(in: gathered.head.headers, started: started, request: request)
        request.report(.responseHead(status: Int(gathered.head.status.code), after: gathered.headArrived - started))
        var response = APIResponse(
            status: AsyncHTTPClientTransport.status(of: gathered.head.status),
            headerFields: transport.responseFields(of: gathered.head.headers),
            body: Data(buffer: gathered.body, byteTransferStrategy: .automatic),
            request: request)
        response.timing = ResponseTiming(started: started, headArrived: gathered.headArrived, bodyEnded: .now, seen: seen)
        return response
    }

    /// The call's error for `error`, the task's failure. Before the head, a closed or
    /// garbled connection may be someone else's leftover: the caller may send an
    /// idempotent request again.
    private func failure(_ error: any Error) -> CatenaError {
        let preHead = head == nil && AsyncHTTPClientTransport.isConnectionFailure(error)
        let failure: any Error = preHead ? AsyncHTTPClientTransport.PreHeadFailure(error: error) : error
        return AsyncHTTPClientTransport.map(failure, request: request, timeout: timeout, limit: limit)
    }

    func didReceiveHead(task: HTTPClient.Task<Response>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        do {
            let declared = try transport.checkHead(status: head.status, headers: head.headers, request: request)
            // A HEAD's, a 204's or a 304's Content-Length describes a body that is not sent.
            if request.method != .head, ![204, 304].contains(head.status.code), let declared, declared > limit {
                throw NIOTooManyBytesError(maxBytes: limit)
            }
        } catch {
            return task.eventLoop.makeFailedFuture(error)
        }
        self.head = head
        headArrived = .now
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Response>, _ part: ByteBuffer) -> EventLoopFuture<Void> {
        guard (body?.readableBytes ?? 0) + part.readableBytes <= limit else {
            return task.eventLoop.makeFailedFuture(NIOTooManyBytesError(maxBytes: limit))
        }
        if body == nil {
            // The first part is kept as it is (no copy); a second one starts the gathering.
            body = part
        } else {
            var part = part
            body!.writeBuffer(&part)
        }
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didFinishRequest(task: HTTPClient.Task<Response>) throws -> Response {
        guard let head else { throw HTTPClientError.remoteConnectionClosed }
        return Response(head: head, body: body ?? ByteBuffer(), headArrived: headArrived)
    }
}
#endif  // AsyncHTTPClient
