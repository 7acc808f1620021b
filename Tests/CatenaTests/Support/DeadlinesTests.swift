@testable import Catena
import Dispatch
import Foundation
import Testing

@Suite("Deadlines: many calls' deadlines on one timer")
struct DeadlinesTests {
    /// What ran, in order.
    final class Log: Sendable {
        private let entries = Locked<[String]>([])
        func append(_ entry: String) { entries.withLock { $0.append(entry) } }
        var all: [String] { entries.withLock { $0 } }
    }

    /// Waits (up to 10 s) until `log` has `count` entries.
    private func wait(for count: Int, in log: Log) async throws {
        let clock = ContinuousClock()
        let start = clock.now
        while log.all.count < count, clock.now - start < .seconds(10) { try await Task.sleep(for: .milliseconds(5)) }
    }

    @Test("each deadline runs once, in the order they fall due, also when an earlier one is added after a later one")
    func order() async throws {
        let deadlines = Deadlines()
        let log = Log()
        _ = deadlines.add(.now() + 0.3) { log.append("late") }
        _ = deadlines.add(.now() + 0.05) { log.append("early") }
        _ = deadlines.add(.now() + 0.15) { log.append("middle") }
        try await wait(for: 3, in: log)
        // Past their time nothing more comes.
        try await Task.sleep(for: .milliseconds(200))
        #expect(log.all == ["early", "middle", "late"])
        #expect(deadlines.count == 0)
    }

    @Test("a removed deadline never runs, and the ones around it still do")
    func removed() async throws {
        let deadlines = Deadlines()
        let log = Log()
        _ = deadlines.add(.now() + 0.05) { log.append("first") }
        let removed = deadlines.add(.now() + 0.1) { log.append("removed") }
        _ = deadlines.add(.now() + 0.2) { log.append("last") }
        deadlines.remove(removed)
        deadlines.remove(removed)  // twice: nothing happens
        try await wait(for: 2, in: log)
        try await Task.sleep(for: .milliseconds(200))
        #expect(log.all == ["first", "last"])
    }

    @Test("thousands added and removed from many threads leave nothing behind; the ones left all run once")
    func concurrent() async throws {
        let deadlines = Deadlines()
        let log = Log()
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for index in 0..<1_000 {
                        let token = deadlines.add(.now() + 30) { log.append("never") }
                        if index % 250 == 0 {
                            _ = deadlines.add(.now() + 0.05) { log.append("\(task)-\(index)") }
                        }
                        deadlines.remove(token)
                    }
                }
            }
        }
        try await wait(for: 32, in: log)
        try await Task.sleep(for: .milliseconds(100))
        #expect(log.all.count == 32)
        #expect(Set(log.all).count == 32)
        #expect(!log.all.contains("never"))
        #expect(deadlines.count == 0)
    }
}
