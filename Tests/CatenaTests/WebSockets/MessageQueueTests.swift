import Foundation
import Testing
@testable import Catena
@testable import CatenaTestSupport

/// The buffer between a socket's reading task and the loop over its messages.
@Suite("WebSocket message queue")
struct MessageQueueTests {
    @Test("empty messages count against the limit: a server's empty frames make the reading side wait")
    func emptyMessagesCount() async throws {
        let queue = MessageQueue(limit: 1024, request: APIRequest(.get, url: URL(string: "ws://127.0.0.1/")!))
        let pushed = Locked(0)
        let producer = Task {
            for _ in 0..<10_000 {
                guard await queue.push(.binary(Data())) else { return }
                pushed.withLock { $0 += 1 }
            }
        }
        #expect(await Timing.eventually(within: .seconds(10)) { pushed.withLock { $0 } > 0 })
        for _ in 0..<100 { await Task.yield() }
        #expect(pushed.withLock { $0 } < 100, "\(pushed.withLock { $0 }) empty messages held for a reader that reads none")
        queue.finish(nil)
        await producer.value
    }

    @Test("a reader that never catches up holds only the unread messages, not every message it read")
    func readMessagesAreReleased() async throws {
        let queue = MessageQueue(limit: 10, request: APIRequest(.get, url: URL(string: "ws://127.0.0.1/")!))
        let producer = Task {
            for index in 0..<500 {
                guard await queue.push(.binary(Data(repeating: UInt8(index & 0xFF), count: 8))) else { return }
            }
            queue.finish(nil)
        }
        var peakSlots = 0
        var read = 0
        while true {
            // Read only once the producer has refilled the queue past its limit, as a
            // slow reader of a fast server does: the queue then never runs empty.
            var turns = 0
            while queue.bufferedBytes <= 10 + 64, read < 499, turns < 10_000 {
                turns += 1
                await Task.yield()
            }
            guard let message = try await queue.next() else { break }
            #expect(message == .binary(Data(repeating: UInt8(read & 0xFF), count: 8)))
            read += 1
            peakSlots = max(peakSlots, queue.slotCount)
        }
        await producer.value
        #expect(read == 500)
        #expect(peakSlots < 100, "the queue kept \(peakSlots) slots for at most 2 unread messages")
    }
}
