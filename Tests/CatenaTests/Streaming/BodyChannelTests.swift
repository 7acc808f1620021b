@testable import Catena
import CatenaTesting
import Foundation
import Testing
import CatenaDemoServer

/// The window between a transport and the task reading a streamed body, without a
/// transport: a batching producer (AsyncHTTPClient's) wakes its reader once per batch,
/// and whatever ends the body, the reader gets every chunk in order, then the end.
@Suite("BodyChannel", .timeLimit(.minutes(1)))
struct BodyChannelTests {
    static let request = APIRequest(.get, url: URL(string: "http://127.0.0.1:1/body")!)

    static func channel(window: Int = 1 << 20) -> BodyChannel {
        BodyChannel(request: request, window: window, idle: nil) {}
    }

    static func bytes(_ text: String) -> Data { Data(text.utf8) }

    /// Runs `body` `runs` times, each with a fresh channel and a generator from a random
    /// seed, which a failure message should name.
    static func seeded(
        runs: Int, window: Int, _ body: (UInt64, inout SplitMix64, BodyChannel) async throws -> Void
    ) async throws {
        for _ in 0..<runs {
            let seed = UInt64.random(in: 0...UInt64.max)
            var generator = SplitMix64(seed: seed)
            try await body(seed, &generator, channel(window: window))
        }
    }

    /// Starts a reader that reads to the end and waits until it is parked in `next()`.
    static func parkedReader(_ channel: BodyChannel) async throws -> Task<([Data], CatenaError?), Never> {
        let reader = Task { () -> ([Data], CatenaError?) in
            var chunks: [Data] = []
            do {
                while let chunk = try await channel.next() { chunks.append(chunk) }
                return (chunks, nil)
            } catch {
                return (chunks, error as? CatenaError)
            }
        }
        let start = ContinuousClock.now
        while !channel.isReaderWaiting {
            try #require(ContinuousClock.now - start < .seconds(10), "the reader never waited")
            try await Task.sleep(for: .milliseconds(1))
        }
        return reader
    }

    @Test("a batch wakes a waiting reader once, when the producer says, and it reads the batch in order")
    func batchWakesOnce() async throws {
        let channel = Self.channel()
        let reader = try await Self.parkedReader(channel)
        let first = channel.offerBatched(Self.bytes("a"))
        let second = channel.offerBatched(Self.bytes("b"))
        let third = channel.offerBatched(Self.bytes("c"))
        #expect(first.wake && first.room)
        #expect(!second.wake && !third.wake, "one wake-up per batch")
        // Not woken until told: the reader still waits.
        try await Task.sleep(for: .milliseconds(20))
        #expect(channel.isReaderWaiting)
        channel.wakeReader()
        channel.finish()
        let (chunks, error) = await reader.value
        #expect(error == nil)
        #expect(chunks == [Self.bytes("abc")], "small parts waiting unread are gathered into one chunk")
    }

    @Test("the producer's end with a wake-up pending hands the reader the waiting chunks before the end", arguments: [false, true])
    func finishWithWakePending(failing: Bool) async throws {
        let channel = Self.channel()
        let reader = try await Self.parkedReader(channel)
        #expect(channel.offerBatched(Self.bytes("one")).wake)
        _ = channel.offerBatched(Self.bytes("two"))
        let failure = CatenaError(.invalidResponse, request: Self.request, detail: "cut")
        channel.finish(failing ? failure : nil)
        channel.wakeReader()  // late, as the event loop's task may be: changes nothing
        let (chunks, error) = await reader.value
        #expect(chunks == [Self.bytes("onetwo")])
        #expect(error?.code == (failing ? .invalidResponse : nil))
    }

    @Test("ending the body from the reader's side with a wake-up pending fails the reader once; the late wake-up is harmless")
    func terminateWithWakePending() async throws {
        let channel = Self.channel()
        let reader = try await Self.parkedReader(channel)
        #expect(channel.offerBatched(Self.bytes("x")).wake)
        channel.terminate(with: CatenaError(.timedOut, request: Self.request, detail: "idle"))
        channel.wakeReader()
        let (chunks, error) = await reader.value
        #expect(chunks.isEmpty)
        #expect(error?.code == .timedOut)
        #expect(!channel.offerBatched(Self.bytes("y")).wake, "a chunk after the end is dropped")
    }

    @Test("a producer that does not batch wakes the reader with each chunk")
    func offerWakesAtOnce() async throws {
        let channel = Self.channel()
        let reader = try await Self.parkedReader(channel)
        #expect(channel.offer(Self.bytes("now")))
        let start = ContinuousClock.now
        while channel.isReaderWaiting {
            try #require(ContinuousClock.now - start < .seconds(10), "the reader was not woken")
            try await Task.sleep(for: .milliseconds(1))
        }
        channel.finish()
        let (chunks, error) = await reader.value
        #expect(error == nil)
        #expect(chunks == [Self.bytes("now")])
    }

    /// Parts larger than `BodyChannel.smallPart`, which are held as they come.
    static let large = 10 * 1024

    @Test("a full window pauses a batching producer once, and the reader's room lets it go on")
    func windowPausesBatches() async throws {
        let rooms = Locked(0)
        let channel = BodyChannel(request: Self.request, window: 16 * 1024, idle: nil) {}
        channel.setOnRoom { rooms.withLock { $0 += 1 } }
        #expect(channel.offerBatched(Data(count: Self.large)).room)
        #expect(!channel.offerBatched(Data(count: Self.large)).room, "20 KiB fill a window of 16")
        #expect(channel.isProducerPaused)
        _ = try await channel.next()
        #expect(rooms.withLock { $0 } == 0, "10 KiB left is more than half the window")
        _ = try await channel.next()
        #expect(rooms.withLock { $0 } == 1)
        #expect(!channel.isProducerPaused)
    }

    @Test("the deferred wake-up that drains a full window lets the paused producer go on")
    func wakeMakesRoom() async throws {
        let rooms = Locked(0)
        let channel = BodyChannel(request: Self.request, window: 16 * 1024, idle: nil) {}
        channel.setOnRoom { rooms.withLock { $0 += 1 } }
        let reader = try await Self.parkedReader(channel)
        #expect(channel.offerBatched(Data(count: 12 * 1024)) == BodyChannel.Offered(room: true, wake: true))
        #expect(channel.offerBatched(Data(count: 6 * 1024)) == BodyChannel.Offered(room: false, wake: false), "18 KiB fill a window of 16")
        channel.wakeReader()
        #expect(rooms.withLock { $0 } == 1, "6 KiB left: the producer may go on")
        #expect(!channel.isProducerPaused)
        channel.finish()
        let (chunks, error) = await reader.value
        #expect(error == nil)
        #expect(chunks.map(\.count) == [12 * 1024, 6 * 1024])
    }

    @Test("small parts waiting unread are gathered, in order, up to the gather limit; a large part is held as it came")
    func gathering() async throws {
        let channel = Self.channel(window: 1 << 20)
        var sent = Data()
        func copying(_ count: Int, _ byte: UInt8) {
            let part = Data(repeating: byte, count: count)
            sent.append(part)
            part.withUnsafeBytes { _ = channel.offerBatched(copying: $0) }
        }
        for index in 0..<1000 { copying(10, UInt8(index % 251)) }
        #expect(channel.chunksHeld == 1, "1,000 parts of 10 bytes: one chunk")
        copying(BodyChannel.gatherLimit - 9_999, 7)
        #expect(channel.chunksHeld == 2, "past the gather limit: a second chunk")
        let large = Data(repeating: 9, count: BodyChannel.smallPart + 1)
        sent.append(large)
        _ = channel.offerBatched(large)
        let small = Self.bytes("after")
        sent.append(small)
        _ = channel.offerBatched(small)
        #expect(channel.chunksHeld == 4, "a large part is a chunk of its own, and nothing is appended to it")
        channel.finish()
        var received: [Data] = []
        while let chunk = try await channel.next() { received.append(chunk) }
        #expect(received.map(\.count) == [10_000, BodyChannel.gatherLimit - 9_999, BodyChannel.smallPart + 1, 5])
        #expect(Data(received.joined()) == sent)
        #expect(received[2] == large)
    }

    @Test("a window filled by gathered small parts pauses the producer once and lets it go on once")
    func gatheredWindow() async throws {
        let rooms = Locked(0)
        let channel = BodyChannel(request: Self.request, window: 1000, idle: nil) {}
        channel.setOnRoom { rooms.withLock { $0 += 1 } }
        var pauses = 0
        for index in 0..<150 {
            let part = Data(repeating: UInt8(index), count: 10)
            if !part.withUnsafeBytes({ channel.offerBatched(copying: $0) }).room { pauses += 1 }
        }
        #expect(pauses == 1, "1,500 bytes fill a window of 1,000 once")
        #expect(channel.chunksHeld == 1)
        #expect(channel.isProducerPaused)
        let chunk = try await channel.next()
        #expect(chunk?.count == 1500)
        #expect(rooms.withLock { $0 } == 1)
        #expect(!channel.isProducerPaused)
    }

    @Test("a producer that waits for room (send) has its small chunks gathered too, after a large one")
    func sendGathers() async throws {
        let channel = Self.channel()
        #expect(await channel.send(Data(repeating: 1, count: BodyChannel.smallPart + 1)))
        for _ in 0..<100 { #expect(await channel.send(Self.bytes("sent"))) }
        #expect(channel.chunksHeld == 2, "the large chunk, then one gathering the small ones")
        channel.finish()
        var counts: [Int] = []
        while let chunk = try await channel.next() { counts.append(chunk.count) }
        #expect(counts == [BodyChannel.smallPart + 1, 400])
    }

    /// Random parts of random sizes (as `Data` and as bytes to copy), nobody reading:
    /// the bytes come out in order, and the chunks held stay few however small the
    /// parts. Seeded: a failure names its seed.
    @Test("random small and large parts held unread: every byte in order, and a bounded number of chunks")
    func gatheringBound() async throws {
        try await Self.seeded(runs: 50, window: 64 << 20) { seed, generator, channel in
            var sent = Data()
            var larges = 0
            for index in 0..<Int.random(in: 1...500, using: &generator) {
                let count = Bool.random(using: &generator) ? Int.random(in: 1...64, using: &generator) : Int.random(in: 1...12_000, using: &generator)
                // Each part its own byte, so a part out of place shows.
                let part = Data(repeating: UInt8(truncatingIfNeeded: index), count: count)
                sent.append(part)
                if count > BodyChannel.smallPart { larges += 1 }
                if Bool.random(using: &generator) {
                    _ = channel.offerBatched(part)
                } else {
                    part.withUnsafeBytes { _ = channel.offerBatched(copying: $0) }
                }
            }
            // Each large part closes the gathering chunk before it; two gathering chunks
            // in a row hold more than the gather limit between them.
            let bound = 2 * larges + 2 * sent.count / BodyChannel.gatherLimit + 2
            #expect(channel.chunksHeld <= bound, "seed \(seed): \(channel.chunksHeld) chunks for \(sent.count) bytes")
            channel.finish()
            var received = Data()
            while let chunk = try await channel.next() { received.append(chunk) }
            #expect(received == sent, "seed \(seed)")
        }
    }

    /// A producer on another task offers random batches, waking (or not yet) at random,
    /// and finishes; the reader must get every byte in order and then the end, and
    /// never hang. Seeded: a failure names its seed.
    @Test("random batches, wake-ups and ends: every byte in order, exactly one end")
    func randomBatches() async throws {
        try await Self.seeded(runs: 200, window: 1 << 20) { seed, generator, channel in
            let reader = Task { () -> (Data, CatenaError?) in
                var bytes = Data()
                do {
                    while let chunk = try await channel.next() { bytes.append(chunk) }
                    return (bytes, nil)
                } catch {
                    return (bytes, error as? CatenaError)
                }
            }
            var sent = Data()
            var pending = false
            for _ in 0..<Int.random(in: 1...40, using: &generator) {
                let chunk = Data((0..<Int.random(in: 1...64, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) })
                sent.append(chunk)
                let offered = Bool.random(using: &generator) ? channel.offerBatched(chunk) : chunk.withUnsafeBytes { channel.offerBatched(copying: $0) }
                if offered.wake { pending = true }
                // The producer's batch ends here, or runs on.
                if pending, Bool.random(using: &generator) {
                    channel.wakeReader()
                    pending = false
                }
                if Int.random(in: 0..<8, using: &generator) == 0 { await Task.yield() }
            }
            let failing = Bool.random(using: &generator)
            // The end may come before the last batch's wake-up, as a failure on the
            // event loop can.
            if pending, Bool.random(using: &generator) { channel.wakeReader() }
            channel.finish(failing ? CatenaError(.invalidResponse, request: Self.request, detail: "cut") : nil)
            if pending { channel.wakeReader() }
            let (received, error) = await reader.value
            #expect(received == sent, "seed \(seed)")
            #expect(error?.code == (failing ? .invalidResponse : nil), "seed \(seed)")
        }
    }
}
