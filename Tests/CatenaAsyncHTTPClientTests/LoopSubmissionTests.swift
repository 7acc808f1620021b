import AsyncHTTPClient
@testable import Catena
@testable import CatenaAsyncHTTPClient
@testable import CatenaDemoServer
import Foundation
import NIOCore
import NIOPosix
import Testing
@testable import CatenaTestSupport

/// A buffered or streamed call on AsyncHTTPClient is started in one task on an event
/// loop: what a cancel before that start does, and groups whose `any()` is not the loop
/// it is called on.
@Suite("Calls started on the event loop", .serialized)
struct LoopSubmissionTests {
    /// A group whose `any()` is `next()`, as the protocol's default (and NIOTS) has it.
    final class NextOnlyGroup: EventLoopGroup {
        let base: MultiThreadedEventLoopGroup
        init(_ base: MultiThreadedEventLoopGroup) { self.base = base }
        func next() -> any EventLoop { base.next() }
        func makeIterator() -> EventLoopIterator { base.makeIterator() }
        func shutdownGracefully(queue: DispatchQueue, _ callback: @escaping @Sendable ((any Error)?) -> Void) {
            base.shutdownGracefully(queue: queue, callback)
        }
    }

    /// Runs `body` with a transport over a client of its own on `loops` event loops, and
    /// shuts client and group down afterwards, also when `body` throws (a client left
    /// running stops a debug build's test process).
    private func withOwnClient(
        loops: Int, _ body: (AsyncHTTPClientTransport, MultiThreadedEventLoopGroup) async throws -> Void
    ) async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: loops)
        let client = HTTPClient(eventLoopGroup: group, configuration: AsyncHTTPClientTransport.defaultConfiguration)
        do {
            try await body(AsyncHTTPClientTransport(client: client), group)
        } catch {
            try? await client.shutdown()
            try? await group.shutdownGracefully()
            throw error
        }
        try await client.shutdown()
        try await group.shutdownGracefully()
    }

    /// Runs `cancel` with a transport on a group of one event loop and a request the
    /// fault server records by its tag; then `sendLater` sends a second tagged request on
    /// the same client, which must reach the server while the cancelled one never did.
    private func expectNeverSent(
        _ cancel: (AsyncHTTPClientTransport, APIRequest, MultiThreadedEventLoopGroup) async throws -> Void,
        later sendLater: (AsyncHTTPClientTransport, APIRequest) async -> Void
    ) async throws {
        let server = try await FaultServer.running()
        func tagged(_ tag: String) -> APIRequest {
            APIRequest(.get, url: server.url(.cutAfterApply).appending(queryItems: [URLQueryItem(name: "tag", value: tag)]))
        }
        let tag = UUID().uuidString
        try await withOwnClient(loops: 1) { transport, group in
            try await cancel(transport, tagged(tag), group)
            // The later request is sent up to three times (the fault closes the connection
            // before any head); the cancelled one, had it been sent, would have come first.
            await sendLater(transport, tagged(tag + "-later"))
            #expect(server.applied("tag:" + tag + "-later") >= 1)
            #expect(server.applied("tag:" + tag) == 0, "the cancelled call reached the server")
        }
    }

    @Test("a call cancelled before its start on the loop fails with cancelled, and the server never sees it")
    func cancelledBeforeStart() async throws {
        try await expectNeverSent { transport, request, _ in
            let delegate = try GatheringDelegate(transport: transport, request: request, timeout: .seconds(10))
            // The cancel is queued on the loop ahead of the start, as when the calling task
            // is cancelled between building the request and handing it over.
            delegate.cancel()
            await withUnsafeContinuation { delegate.start(resuming: $0) }
            do throws(CatenaError) {
                _ = try delegate.answer()
                Issue.record("the cancelled call was answered")
            } catch {
                #expect(error.code == .cancelled)
            }
            #expect(transport.buffersInFlightCount == 0, "the call never sent is still counted in")
        } later: { transport, request in
            _ = try? await transport.load(request)
        }
    }

    @Test("a stream cancelled before its start on the loop fails with cancelled, and the server never sees it")
    func streamCancelledBeforeStart() async throws {
        try await expectNeverSent { transport, request, group in
            let delegate = try StreamingDelegate(transport: transport, request: request, timeout: .seconds(10))
            // The loop is held while the call is started and then cancelled, so the cancel
            // comes after the call began to wait but before the loop got to sending it.
            let gate = DispatchSemaphore(value: 0)
            group.next().execute { gate.wait() }
            await withUnsafeContinuation {
                delegate.start(resuming: $0)
                delegate.cancelHead()
                gate.signal()
            }
            do throws(CatenaError) {
                _ = try delegate.answer()
                Issue.record("the cancelled stream was answered")
            } catch {
                #expect(error.code == .cancelled)
            }
            // Sent and cancelled at once, it would not reach the server either: it must not be sent.
            #expect(!delegate.wasSent, "the cancelled stream was handed to AsyncHTTPClient")
        } later: { transport, request in
            _ = try? await transport.stream(request).collect()
        }
    }

    @Test("buffered calls count themselves out once however they end, and a call made alone starts on the transport's home loop")
    func homeLoop() async throws {
        let base = try await TestServer.running().baseURL
        let closed = try await TestServer.closedPort()
        try await withOwnClient(loops: 2) { transport, _ in try await countsOut(transport, base: base, closed: closed) }
    }

    private func countsOut(_ transport: AsyncHTTPClientTransport, base: URL, closed: Int) async throws {
        func request(_ path: String, delay: String = "0") -> APIRequest {
            APIRequest(.get, url: base.appending(path: path).appending(queryItems: [URLQueryItem(name: "delay", value: delay)]))
        }
        // Answers, one after another and sixteen at a time; a 404 is an answer too.
        for _ in 0..<4 { #expect(try await transport.load(request("api/users/2")).status == .ok) }
        try await withThrowingTaskGroup(of: Void.self) { calls in
            for _ in 0..<16 { calls.addTask { _ = try await transport.load(request("api/users/2")) } }
            try await calls.waitForAll()
        }
        #expect(try await transport.load(request("api/users/23")).status == .notFound)
        // Failures: nothing listens, out of time, cancelled in flight, cancelled before it began.
        let refused = await #expect(throws: CatenaError.self) {
            try await transport.load(APIRequest(.get, url: URL(string: "http://127.0.0.1:\(closed)/")!))
        }
        #expect(refused?.code == .cannotConnect)
        var slow = request("api/users/2", delay: "5")
        slow[option: RequestTimeout.self] = .milliseconds(200)
        let late = await #expect(throws: CatenaError.self) { try await transport.load(slow) }
        #expect(late?.code == .timedOut)
        let inFlight = Task { try await transport.load(request("api/users/2", delay: "5")) }
        try await Task.sleep(for: .milliseconds(100))
        inFlight.cancel()
        #expect((await inFlight.result.failure as? CatenaError)?.code == .cancelled)
        // Refused while its request is built, before it is counted in (a call cancelled
        // after that, before its start on the loop: "a call cancelled before its start").
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await transport.load(request("api/users/2"))
        }
        #expect((await early.result.failure as? CatenaError)?.code == .cancelled)
        #expect(transport.buffersInFlightCount == 0, "calls still counted in: the next would not start at home")
        // Alone, a call starts at home; beside another, it is spread over the group.
        let home = try #require(transport.homeLoop)
        #expect(transport.startingLoop() === home)
        let beside = (0..<4).map { _ in transport.startingLoop() }
        #expect(beside.contains { $0 !== home }, "four calls beside one in flight all started at home")
        for _ in 0..<5 { transport.callEnded() }
        #expect(transport.buffersInFlightCount == 0)
        // A caller on one of the group's loops starts where it is.
        let other = try #require(transport.client.eventLoopGroup.makeIterator().first { $0 !== home })
        let started = try await other.submit { transport.startingLoop() }.get()
        transport.callEnded()
        #expect(started === other, "a call made on a loop went home")
        // Transports sharing a client share its home.
        #expect(AsyncHTTPClientTransport(client: transport.client).homeLoop === home)
    }

    @Test("concurrent calls through a group whose any() is another loop each time all succeed")
    func nextOnlyGroup() async throws {
        let server = try await FaultServer.running()
        let base = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let group = NextOnlyGroup(base)
        let client = HTTPClient(eventLoopGroup: group, configuration: AsyncHTTPClientTransport.defaultConfiguration)
        let transport = AsyncHTTPClientTransport(client: client)
        #expect(!transport.anyIsCurrentLoop)
        let bodies = try await withThrowingTaskGroup(of: String.self) { calls in
            for _ in 0..<32 {
                calls.addTask { String(decoding: try await transport.load(faultRequest(.ok, on: server)).body, as: UTF8.self) }
            }
            return try await calls.reduce(into: []) { $0.append($1) }
        }
        #expect(bodies == Array(repeating: MisbehavingServer.okBody, count: 32))
        let streamed = try await withThrowingTaskGroup(of: String.self) { calls in
            for _ in 0..<32 {
                calls.addTask { String(decoding: try await transport.stream(faultRequest(.ok, on: server)).collect().body, as: UTF8.self) }
            }
            return try await calls.reduce(into: []) { $0.append($1) }
        }
        #expect(streamed == Array(repeating: MisbehavingServer.okBody, count: 32))
        try await client.shutdown()
        try await base.shutdownGracefully()
    }
}
