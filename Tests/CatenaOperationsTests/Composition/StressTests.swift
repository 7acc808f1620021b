import CatenaOperations
import Foundation
import Testing

@Suite("Stress")
struct OperationStressTests {
    /// Weak references to every operation a test made.
    final class Tracker: Sendable {
        private final class Weak: Sendable {
            // Written once, before the box is shared.
            nonisolated(unsafe) weak var operation: Operation?
            init(_ operation: Operation) { self.operation = operation }
        }
        private let boxes = Guarded<[Weak]>([])
        func track(_ operation: Operation) { boxes.withLock { $0.append(Weak(operation)) } }
        var alive: Int { boxes.withLock { $0.count { $0.operation != nil } } }
        var count: Int { boxes.withLock { $0.count } }
    }

    @Test("thousands of chains with random cancellation all complete, once, and leave nothing behind")
    func randomCancellation() async throws {
        let tracker = Tracker()
        let completions = Counter()
        let doubleCompletions = Counter()
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 4
        let chains = 2_000
        var generator = SystemRandomNumberGenerator()
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<chains {
                // 128 chains at a time, far more than the queue's four slots: two thousand
                // tasks ready at once held every other test of a sanitized full suite
                // off the two cooperative threads for seconds.
                if index >= 128 { await group.next() }
                let length = Int.random(in: 1...6, using: &generator)
                let cancelAfter = Int.random(in: 0...3, using: &generator)  // 0: never
                let policy: ChainFailurePolicy = index.isMultiple(of: 2) ? .passForward : .cancelRemaining
                let fails = index.isMultiple(of: 5)
                group.addTask {
                    let head = TaskOperation { () async throws -> Int in
                        try await Task.sleep(for: .microseconds(Int.random(in: 0...200)))
                        if fails { throw TestFailure(tag: "head") }
                        return 0
                    }
                    tracker.track(head)
                    var chain = head.passesResult(to: AddOne())
                    tracker.track(chain.last)
                    for _ in 1..<length {
                        let step = AddOne()
                        tracker.track(step)
                        chain = chain.passesResult(to: step)
                    }
                    chain = chain.onFailure(policy)
                    let calls = Counter()
                    chain.last.addResultBlock { _ in
                        calls.increment()
                        if calls.count > 1 { doubleCompletions.increment() }
                        completions.increment()
                    }
                    chain.enqueue(on: queue)
                    if cancelAfter > 0 {
                        try? await Task.sleep(for: .microseconds(cancelAfter * 50))
                        chain.cancel()
                    }
                    let result = await chain.last.result()
                    if case .success(let value) = result {
                        // A chain that was not stopped adds up to its length.
                        #expect(value == length)
                    }
                }
            }
        }
        #expect(completions.count == chains, "every chain completes")
        #expect(doubleCompletions.count == 0)
        // The bound only limits how long a failure takes to show: on two cores under
        // ThreadSanitizer the last releases can wait behind the pool's backlog.
        let freed = await eventually(seconds: 60) { tracker.alive == 0 }
        #expect(freed, "\(tracker.alive) of \(tracker.count) operations still alive")
    }
}
