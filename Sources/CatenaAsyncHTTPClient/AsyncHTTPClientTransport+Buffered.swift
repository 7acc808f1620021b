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
    /// The call's task waits once, and holds nothing across that wait but the task and
    /// its delegate: the request is built and sent, and the answer made, in synchronous
    /// code (on the thread's stack). Async frames come from the task's allocator, whose
    /// first slab is small: frames past it come from slabs taken from `malloc`, which a
    /// task per call (a server's handler, say) pays anew (BENCHMARKS.md, "A task per call").
    ///
    /// The request is handed to AsyncHTTPClient on an event loop, in one hop. Handed
    /// over from the caller's thread, each of the futures AsyncHTTPClient and Catena
    /// attach to the request (its own bookkeeping, its deadline, the caller's wait)
    /// would queue a task onto the loop and wake it: three hops where one does.
    func sendGathered(_ request: APIRequest, timeout: Duration) async throws(CatenaError) -> APIResponse {
        let outgoing = try delegateRequest(request, timeout: timeout)
        let client = self.client
        let delegate = GatheringDelegate(
            transport: self, request: request, limit: request[option: MaximumResponseSize.self], loop: client.eventLoopGroup.any())
        let deadline = NIODeadline.now() + TimeAmount(timeout)
        let outcome = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                delegate.start(outgoing, on: client, deadline: deadline, continuation: continuation)
            }
        } onCancel: {
            delegate.cancel()
        }
        switch outcome {
        case .success(let gathered): return delegate.response(gathered)
        case .failure(let error): throw delegate.failure(error, timeout: timeout)
        }
    }

    /// `request` as the delegate API takes it, its body (in memory: the delegate paths
    /// take no streamed body) produced afresh; `cancelled` when the calling task is.
    func delegateRequest(_ request: APIRequest, timeout: Duration) throws(CatenaError) -> HTTPClient.Request {
        let outgoing: HTTPClient.Request
        do {
            outgoing = try HTTPClient.Request(
                url: try request.urlString(), method: HTTPMethod(rawValue: request.method.rawValue), headers: try headers(for: request),
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
/// `@unchecked Sendable`: its state is touched on `loop` only, one access after another,
/// until the task's future completes. `start` and `cancel` run there, and the task is
/// started with `loop` as its event loop, where AsyncHTTPClient calls every method of a
/// delegate (the client Catena configures follows no redirects, which would start a
/// task of their own). `didFinishRequest`'s answer is handed over through the task's
/// future; `response(_:)` and `failure(_:timeout:)` read the state elsewhere, after that
/// future completed on `loop`.
final class GatheringDelegate: HTTPClientResponseDelegate, @unchecked Sendable {
    struct Response: Sendable {
        var head: HTTPResponseHead
        var body: ByteBuffer
        var headArrived: ContinuousClock.Instant
    }

    private let transport: AsyncHTTPClientTransport
    private let request: APIRequest
    private let limit: Int
    /// The event loop the exchange is started on and reports on.
    private let loop: any EventLoop
    /// The exchange, once started; for `cancel()`.
    private var task: HTTPClient.Task<Response>?
    private var cancelled = false
    /// When the request was handed to AsyncHTTPClient.
    private let started = ContinuousClock.now
    private var head: HTTPResponseHead?
    private var headArrived = ContinuousClock.now
    private var body: ByteBuffer?

    init(transport: AsyncHTTPClientTransport, request: APIRequest, limit: Int, loop: any EventLoop) {
        self.transport = transport
        self.request = request
        self.limit = limit
        self.loop = loop
    }

    /// Starts the exchange on `loop` and reports its outcome to `continuation`, once: a
    /// call cancelled before that fails with `HTTPClientError.cancelled` and is never
    /// sent. Started there, the futures attached to the task (AsyncHTTPClient's own
    /// bookkeeping, its deadline, this wait) cost no hop each.
    func start(
        _ outgoing: HTTPClient.Request, on client: HTTPClient, deadline: NIODeadline,
        continuation: CheckedContinuation<Result<Response, any Error>, Never>
    ) {
        loop.execute { [self] in
            guard !cancelled else { return continuation.resume(returning: .failure(HTTPClientError.cancelled)) }
            // On one of its loops, a MultiThreadedEventLoopGroup's `any()` is that loop, so
            // `.indifferent` makes it the task's loop, as `.delegate(on:)` does at the price
            // of a walk over the group (an array allocated per call) that other groups need:
            // their `any()` may be `next()`, another loop each time.
            let preference: HTTPClient.EventLoopPreference = transport.anyIsCurrentLoop ? .indifferent : .delegate(on: loop)
            let task = client.execute(request: outgoing, delegate: self, eventLoop: preference, deadline: deadline)
            assert(task.eventLoop === loop, "the delegate's state lives on its loop")
            self.task = task
            task.futureResult.whenComplete { continuation.resume(returning: $0) }
        }
    }

    /// Cancels the exchange, or keeps it from starting. From any thread.
    func cancel() {
        loop.execute { [self] in
            cancelled = true
            task?.cancel()
        }
    }

    /// The answer `gathered` makes, reported to the request's observers; on the
    /// caller's task, not the event loop: an observer that takes its time must not hold
    /// up every connection on that loop. (Called once the task's future completed.)
    func response(_ gathered: Response) -> APIResponse {
        request.report(.responseHead(status: Int(gathered.head.status.code), after: gathered.headArrived - started))
        var response = APIResponse(
            status: HTTPResponse.Status(code: Int(gathered.head.status.code), reasonPhrase: gathered.head.status.reasonPhrase),
            headerFields: AsyncHTTPClientTransport.fields(of: gathered.head.headers),
            body: Data(buffer: gathered.body, byteTransferStrategy: .automatic),
            request: request)
        response.timing = ResponseTiming(started: started, headArrived: gathered.headArrived, bodyEnded: .now)
        return response
    }

    /// The call's error for `error`, the task's failure. Before the head, a closed or
    /// garbled connection may be someone else's leftover: the caller may send an
    /// idempotent request again. (Called once the task's future completed.)
    func failure(_ error: any Error, timeout: Duration) -> CatenaError {
        let preHead = head == nil && AsyncHTTPClientTransport.isConnectionFailure(error)
        let failure: any Error = preHead ? AsyncHTTPClientTransport.PreHeadFailure(error: error) : error
        return AsyncHTTPClientTransport.map(failure, request: request, timeout: timeout, limit: limit)
    }

    func didReceiveHead(task: HTTPClient.Task<Response>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        do {
            try transport.checkHead(status: head.status, headers: head.headers, request: request)
            // A HEAD's, a 204's or a 304's Content-Length describes a body that is not sent.
            if request.method != .head, ![204, 304].contains(head.status.code),
                let declared = head.headers.first(name: "Content-Length").flatMap(Int.init), declared > limit
            {
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
