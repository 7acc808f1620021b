import Catena
import CatenaAsyncHTTPClient
import CatenaDemoServer
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket

private typealias Frame = NIOWebSocket.WebSocketFrame

/// WebSockets against the demo server in this process: Catena's socket
/// (`AsyncHTTPClientTransport.webSocket`) side by side with SwiftNIO's own client
/// underneath it (`NIOTypedWebSocketClientUpgrader`, a frame aggregator and an
/// `NIOAsyncChannel`), one connection each, on the same two event loops.
/// - echo round trips one at a time, the two taking turns message by message;
/// - messages a second for 1 KiB and 64 KiB binary messages: a task sends, the caller
///   reads the echoes, rounds in rotating order;
/// - resident memory while `/ws/flood` pushes 64 KiB messages to a reader that takes
///   one every millisecond, each variant twice (raw, Catena, Catena, raw).
/// The server runs in this process: CPU per message counts its work too, the same for
/// both, which draws the CPU ratio towards 1.
func webSocketBenchmark(rounds: Int, requests: Int) async throws {
    let server = try await DemoServer.start(webSockets: true, logLevel: .error)
    let transport = AsyncHTTPClientTransport()
    var options = WebSocketOptions()
    options.pingInterval = nil
    let echoURL = server.baseURL.appending(path: "ws/echo")
    let catena = CatenaSocket(try await transport.webSocket(APIRequest(.get, url: echoURL), options: options))
    let raw = try await RawSocket.open(echoURL)

    print("## WebSockets (`--only websocket`)")
    print()
    print("| workload | variant | msgs/s | p50 ms | p99 ms | CPU µs/msg | Catena / raw throughput | raw / Catena CPU |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    let variants: [any EchoSocket] = [raw, catena]
    let names = ["raw SwiftNIO client", "Catena WebSocket"]

    // Warm-up, then round trips one at a time, the two in turn.
    for socket in variants { for _ in 0..<200 { try await socket.roundTrip(Data(repeating: 1, count: 32)) } }
    var sequential = Array(repeating: [Round](), count: 2)
    let clock = ContinuousClock()
    for _ in 0..<max(3, rounds / 3) {
        var latencies = Array(repeating: [Duration](), count: 2)
        for iteration in 0..<requests {
            for offset in 0..<2 {
                let index = (iteration + offset) % 2
                let begin = clock.now
                try await variants[index].roundTrip(Data(repeating: 1, count: 32))
                latencies[index].append(clock.now - begin)
            }
        }
        for index in 0..<2 { sequential[index].append(Round(wall: latencies[index].reduce(.zero, +), latencies: latencies[index])) }
    }
    report("\(requests) echo round trips, 32 B, one at a time", names, sequential, cpu: false)

    // Throughput: sends and reads overlap; a round is `count` messages of `size` bytes.
    for (size, count) in [(1024, 20_000), (64 * 1024, 1_000)] {
        let payload = Data(repeating: 7, count: size)
        var streamed = Array(repeating: [Round](), count: 2)
        for round in 0..<rounds {
            for offset in 0..<2 {
                let index = (round + offset) % 2
                let cpuStart = processCPUTime()
                let start = clock.now
                try await variants[index].stream(payload, count: count)
                let wall = clock.now - start
                // Each message counts the mean time (throughput is count / wall); no
                // single message is timed, so the row prints no p50 or p99.
                streamed[index].append(
                    Round(wall: wall, latencies: Array(repeating: wall / count, count: count), cpuPerRequest: (processCPUTime() - cpuStart) / count))
            }
        }
        report("\(count) × \(size / 1024) KiB binary, send and read overlapped", names, streamed, cpu: true, latencies: false)
    }
    print()
    for socket in variants { try await socket.close() }

    // A flood to a slow reader: resident memory while it reads 2,000 of 64 KiB messages,
    // one every millisecond (128 MB pushed), over what it was after the first.
    print("| slow reader of a 64 KiB flood | variant | resident growth, peak MB | messages read |")
    print("|---|---|---:|---:|")
    let floodURL = server.baseURL.appending(path: "ws/flood").appending(queryItems: [
        URLQueryItem(name: "n", value: "100000"), URLQueryItem(name: "size", value: "65536"),
    ])
    // Each variant twice, in turn, so neither always reuses pages the other freed.
    for index in [0, 1, 1, 0] {
        let name = names[index]
        let socket: any EchoSocket =
            index == 0 ? try await RawSocket.open(floodURL) : CatenaSocket(try await transport.webSocket(APIRequest(.get, url: floodURL), options: options))
        try await socket.readOne()
        let baseline = residentBytes()
        let (read, peak) = try await peakResident {
            for _ in 0..<2000 {
                try await socket.readOne()
                try await Task.sleep(for: .milliseconds(1))
            }
            return 2000
        }
        print("| 2,000 read, 1 ms apart | \(name) | \(format(Double(peak - baseline) / 1e6, 1)) | \(read) |")
        try await socket.close()
    }
    print()
    try await transport.shutdown()
    await server.stop()
}

/// What each variant does with its socket.
private protocol EchoSocket: Sendable {
    /// Sends `payload` as a binary message and reads its echo.
    func roundTrip(_ payload: Data) async throws
    /// Sends `count` messages from a task of its own while reading as many echoes.
    func stream(_ payload: Data, count: Int) async throws
    /// Reads one message.
    func readOne() async throws
    /// Sends a close and closes the connection.
    func close() async throws
}

private struct CatenaSocket: EchoSocket {
    let socket: WebSocket

    init(_ socket: WebSocket) { self.socket = socket }

    func roundTrip(_ payload: Data) async throws {
        try await socket.send(data: payload)
        try await readOne()
    }

    func stream(_ payload: Data, count: Int) async throws {
        let socket = socket
        async let sent: Void = { for _ in 0..<count { try await socket.send(data: payload) } }()
        for _ in 0..<count { try await readOne() }
        try await sent
    }

    func readOne() async throws {
        var iterator = socket.messages.makeAsyncIterator()
        guard case .binary = try await iterator.next() else { throw BenchmarkError.status(-1) }
    }

    func close() async throws { await socket.close() }
}

/// SwiftNIO's WebSocket client as its own example builds it, with a frame aggregator so
/// that it reads whole messages as Catena does.
// @unchecked: `inbound` is only read and advanced by one task at a time (the benchmark's
// caller, never the sending task), which awaits each read before the next; the stream
// and writer are NIO's, used while `executeThenClose`'s body waits in `session`.
private final class RawSocket: EchoSocket, @unchecked Sendable {
    private var inbound: NIOAsyncChannelInboundStream<Frame>.AsyncIterator
    private let outbound: NIOAsyncChannelOutboundWriter<Frame>
    private let ending: AsyncStream<Void>.Continuation
    private let session: Task<Void, any Error>

    private init(
        _ inbound: NIOAsyncChannelInboundStream<Frame>, _ outbound: NIOAsyncChannelOutboundWriter<Frame>, ending: AsyncStream<Void>.Continuation,
        session: Task<Void, any Error>
    ) {
        self.inbound = inbound.makeAsyncIterator()
        self.outbound = outbound
        self.ending = ending
        self.session = session
    }

    /// Upgrades, then keeps the channel open in `executeThenClose` until ``close()``.
    static func open(_ url: URL) async throws -> RawSocket {
        let channel = try await upgrade(url)
        let (ended, ending) = AsyncStream.makeStream(of: Void.self)
        let (opened, opening) = AsyncStream.makeStream(of: (NIOAsyncChannelInboundStream<Frame>, NIOAsyncChannelOutboundWriter<Frame>).self)
        let session = Task {
            defer { opening.finish() }
            try await channel.executeThenClose { inbound, outbound in
                opening.yield((inbound, outbound))
                for await _ in ended {}
            }
        }
        var streams = opened.makeAsyncIterator()
        guard let (inbound, outbound) = await streams.next() else {
            try await session.value
            throw BenchmarkError.status(-1)
        }
        return RawSocket(inbound, outbound, ending: ending, session: session)
    }

    private static func upgrade(_ url: URL) async throws -> NIOAsyncChannel<Frame, Frame> {
        let path = url.path + (url.query.map { "?" + $0 } ?? "")
        let upgraded = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: url.host!, port: url.port!) { channel in
                channel.eventLoop.makeCompletedFuture {
                    let upgrader = NIOTypedWebSocketClientUpgrader<NIOAsyncChannel<Frame, Frame>?>(maxFrameSize: 1 << 20) {
                        channel, _ in
                        channel.eventLoop.makeCompletedFuture {
                            try channel.pipeline.syncOperations.addHandler(
                                NIOWebSocketFrameAggregator(minNonFinalFragmentSize: 0, maxAccumulatedFrameCount: 1 << 16, maxAccumulatedFrameSize: 1 << 22))
                            return try NIOAsyncChannel(wrappingChannelSynchronously: channel)
                        }
                    }
                    var headers = HTTPHeaders()
                    headers.add(name: "Host", value: "\(url.host!):\(url.port!)")
                    let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: path, headers: headers)
                    let configuration = NIOTypedHTTPClientUpgradeConfiguration(upgradeRequestHead: head, upgraders: [upgrader]) { channel in
                        channel.eventLoop.makeCompletedFuture { nil }
                    }
                    return try channel.pipeline.syncOperations.configureUpgradableHTTPClientPipeline(
                        configuration: .init(upgradeConfiguration: configuration))
                }
            }
        guard let channel = try await upgraded.get() else { throw BenchmarkError.status(-1) }
        return channel
    }

    func roundTrip(_ payload: Data) async throws {
        try await send(payload)
        try await readOne()
    }

    func stream(_ payload: Data, count: Int) async throws {
        async let sent: Void = { for _ in 0..<count { try await self.send(payload) } }()
        for _ in 0..<count { try await readOne() }
        try await sent
    }

    private func send(_ payload: Data) async throws {
        try await outbound.write(Frame(fin: true, opcode: .binary, maskKey: .random(), data: ByteBuffer(bytes: payload)))
    }

    func readOne() async throws {
        guard let frame = try await inbound.next(), frame.opcode == .binary else { throw BenchmarkError.status(-1) }
    }

    func close() async throws {
        try await outbound.write(Frame(fin: true, opcode: .connectionClose, maskKey: .random(), data: ByteBuffer(bytes: [0x03, 0xE8])))
        ending.finish()
        try await session.value
    }
}
