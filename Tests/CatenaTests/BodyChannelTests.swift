@testable import Catena
import CatenaTesting
import Foundation
import Testing

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
        #expect(chunks == ["a", "b", "c"].map(Self.bytes))
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
        #expect(chunks == ["one", "two"].map(Self.bytes))
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

    @Test("a full window pauses a batching producer once, and the reader's room lets it go on")
    func windowPausesBatches() async throws {
        let rooms = Locked(0)
        let channel = BodyChannel(request: Self.request, window: 8, idle: nil) {}
        channel.setOnRoom { rooms.withLock { $0 += 1 } }
        #expect(channel.offerBatched(Data(count: 5)).room)
        #expect(!channel.offerBatched(Data(count: 5)).room, "10 bytes fill a window of 8")
        #expect(channel.isProducerPaused)
        _ = try await channel.next()
        #expect(rooms.withLock { $0 } == 0, "5 bytes left is more than half the window")
        _ = try await channel.next()
        #expect(rooms.withLock { $0 } == 1)
        #expect(!channel.isProducerPaused)
    }

    @Test("the deferred wake-up that drains a full window lets the paused producer go on")
    func wakeMakesRoom() async throws {
        let rooms = Locked(0)
        let channel = BodyChannel(request: Self.request, window: 8, idle: nil) {}
        channel.setOnRoom { rooms.withLock { $0 += 1 } }
        let reader = try await Self.parkedReader(channel)
        #expect(channel.offerBatched(Data(count: 6)) == BodyChannel.Offered(room: true, wake: true))
        #expect(channel.offerBatched(Data(count: 3)) == BodyChannel.Offered(room: false, wake: false), "9 bytes fill a window of 8")
        channel.wakeReader()
        #expect(rooms.withLock { $0 } == 1, "3 bytes left: the producer may go on")
        #expect(!channel.isProducerPaused)
        channel.finish()
        let (chunks, error) = await reader.value
        #expect(error == nil)
        #expect(chunks.map(\.count) == [6, 3])
    }

    /// A producer on another task offers random batches, waking (or not yet) at random,
    /// and finishes; the reader must get every byte in order and then the end, and
    /// never hang. Seeded: a failure names its seed.
    @Test("random batches, wake-ups and ends: every byte in order, exactly one end")
    func randomBatches() async throws {
        for _ in 0..<200 {
            let seed = UInt64.random(in: 0...UInt64.max)
            var generator = SplitMix64(seed: seed)
            let channel = Self.channel(window: 1 << 20)
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
                if channel.offerBatched(chunk).wake { pending = true }
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
