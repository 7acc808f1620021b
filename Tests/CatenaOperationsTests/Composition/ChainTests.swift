import CatenaOperations
import Foundation
import Testing

@Suite("Chains")
struct OperationChainTests {
    @Test("passesResult hands each result to the next operation")
    func passesResults() async throws {
        let chain = Produce(.success(1)).passesResult(to: AddOne()).passesResult(to: AddOne())
        #expect(try await chain.value(on: OperationQueue()) == 3)
        #expect(chain.operations.count == 3)
    }

    @Test("then(do:) runs operations in order")
    func thenRunsInOrder() async throws {
        let order = Recorder<Int>()
        let steps = (0..<5).map { index in BlockOperation { order.append(index) } }
        var chain = steps[0].asChain()
        for step in steps.dropFirst() { chain = chain.then(do: step) }
        let last = Produce(.success("done"))
        #expect(try await chain.then(do: last).value(on: OperationQueue()) == "done")
        #expect(order.all == [0, 1, 2, 3, 4])
    }

    @Test("passForward: a failure passes through the rest of the chain to its end")
    func failurePassesForward() async {
        let middle = AddOne(), last = AddOne()
        let inspecting = Inspecting()
        let chain = Produce<Int>(.failure(TestFailure(tag: "first"))).passesResult(to: middle).passesResult(to: inspecting).passesResult(to: last)
        await #expect(throws: TestFailure(tag: "first")) { try await chain.value(on: OperationQueue()) }
        #expect(middle.executions.count == 0, "a consumer given a failure does not run its work")
        #expect(inspecting.sawFailure.count == 1, "an operation that overrides execute() sees the failure")
        #expect(!last.isCancelled)
    }

    @Test("a foreign step whose owner replaces its completion block still hands on to the next step")
    func foreignCompletionBlockReplaced() async throws {
        let replaced = Guarded(false)
        let plain = BlockOperation {}
        plain.addExecutionBlock {
            // The owner's own completion block, set while the chain watches it.
            plain.completionBlock = { replaced.withLock { $0 = true } }
        }
        let chain = Produce<Int>(.success(1)).then(do: plain).then(do: Produce(.success(2)))
        let value = Task { try await chain.value(on: OperationQueue()) }
        // Generous bounds: they only limit how long a failure takes to show. A sanitized
        // full suite once kept the queue's threads busy for over ten seconds.
        let ended = await eventually(seconds: 60) { plain.isFinished && replaced.withLock { $0 } }
        #expect(ended)
        let result = await eventually(seconds: 60) { chain.last.isFinished }
        #expect(result, "the chain went on after the foreign step")
        if result { #expect(try await value.value == 2) } else { value.cancel() }
    }

    @Test("cancelRemaining: what follows a failure is cancelled and the error still reaches the end")
    func failureCancelsRemaining() async {
        let after = (0..<3).map { _ in AddOne() }
        let plain = BlockOperation {}
        let chain = Produce<Int>(.failure(TestFailure(tag: "stop"))).then(do: plain)
            .then(do: Produce(.success(1))).passesResult(to: after[0]).passesResult(to: after[1]).passesResult(to: after[2])
            .onFailure(.cancelRemaining)
        await #expect(throws: TestFailure(tag: "stop")) { try await chain.value(on: OperationQueue()) }
        #expect(plain.isCancelled)
        #expect(after.allSatisfy { $0.isCancelled && $0.executions.count == 0 })
    }

    @Test("progress of a whole chain reaches 1.0, and cancelling it cancels the chain")
    func progress() async throws {
        let chain = Produce(.success(0)).passesResult(to: AddOne()).passesResult(to: AddOne()).passesResult(to: AddOne())
        let progress = chain.enqueueWithProgress(on: OperationQueue())
        #expect(try await chain.value() == 3)
        #expect(await eventually { progress.fractionCompleted == 1.0 })
        #expect(progress.totalUnitCount == 4)

        let running = UntilCancelled()
        let stalled = running.passesResult(to: AddOne())
        let stalledProgress = stalled.enqueueWithProgress(on: OperationQueue())
        #expect(await eventually { running.started.count == 1 })
        stalledProgress.cancel()
        let result = await stalled.last.result()
        #expect((result.failure as? OperationError)?.code == .cancelled)
    }

    @Test("enqueueing a chain twice runs it once")
    func enqueueTwice() async throws {
        let first = Produce(.success(1))
        let chain = first.passesResult(to: AddOne())
        let queue = OperationQueue()
        chain.enqueue(on: queue)
        chain.enqueue(on: queue)
        #expect(try await chain.value(on: queue) == 2)
        #expect(first.executions.count == 1)
    }

    @Test("awaiting a chain: task cancellation cancels its operations")
    func taskCancellationCancelsChain() async {
        let running = UntilCancelled()
        let next = AddOne()
        let chain = running.passesResult(to: next)
        let task = Task { try await chain.value(on: OperationQueue()) }
        #expect(await eventually { running.started.count == 1 })
        task.cancel()
        let outcome = await task.result
        #expect(OperationError.isCancellation(outcome.failure ?? TestFailure(tag: "no error")))
        #expect(running.isCancelled && next.isCancelled)
        #expect(next.executions.count == 0)
    }

    @Test("a 10,000-step chain keeps the queue's pending set small and adds up")
    func longChain() async throws {
        let queue = OperationQueue()
        let most = Maximum()
        var chain = Produce(.success(0)).passesResult(to: PendingWatcher(queue: queue, most: most))
        for _ in 0..<9_999 { chain = chain.passesResult(to: PendingWatcher(queue: queue, most: most)) }
        #expect(try await chain.value(on: queue) == 10_000)
        // The chain adds each step when its predecessor finished: the queue never holds
        // waiting operations (Linux's quadratic path). Seen from inside a step: itself,
        // and perhaps a predecessor or two still on their way out (the queue drops a
        // finished operation on its own thread: 3 was seen once on a loaded machine).
        // The point is a bound that does not grow with the chain's 10,000 steps.
        #expect(most.value <= 4)
    }

    @Test("on a serial queue every step goes through the queue: nothing else of the queue runs alongside")
    func serialQueue() async throws {
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        let gauge = Gauge()
        // Exclusive steps go through the queue; transforms are started directly by the
        // step before them, in its slot.
        let transform = {
            TransformOperation { (value: Int) -> Int in
                gauge.enter()
                usleep(10)
                gauge.leave()
                return value
            }
        }
        var chain = Produce(.success(0)).passesResult(to: Exclusive(gauge))
        for _ in 0..<300 { chain = chain.passesResult(to: transform()).passesResult(to: Exclusive(gauge)) }
        chain.enqueue(on: queue)
        let others = (0..<100).map { _ in
            BlockOperation {
                gauge.enter()
                usleep(50)
                gauge.leave()
            }
        }
        for other in others { queue.addOperation(other) }
        #expect(try await chain.value() == 301)
        #expect(await eventually { others.allSatisfy(\.isFinished) })
        #expect(gauge.most == 1)
    }

    @Test("the queue never looks empty between two steps")
    func noGapBetweenSteps() async throws {
        let queue = OperationQueue()
        for _ in 0..<20 {
            let last = AddOne()
            let chain = Produce(.success(0), later: true)
                .passesResult(
                    to: TaskOperation { (value: Int) in
                        try await Task.sleep(for: .milliseconds(2))
                        return value + 1
                    }
                )
                .passesResult(to: TransformOperation { (value: Int) in value }).passesResult(to: last)
            chain.enqueue(on: queue)
            await waitUntilAllFinished(queue)
            #expect(last.isFinished, "waitUntilAllOperationsAreFinished returned while the chain still had steps to run")
        }
    }

    @Test("the queue's cancelAllOperations reaches the steps not yet on the queue")
    func cancelAllReachesLaterSteps() async {
        let queue = OperationQueue()
        let running = UntilCancelled()
        let later = BlockOperation {}
        let last = Produce(.success(1))
        let chain = running.then(do: later).then(do: last)
        chain.enqueue(on: queue)
        #expect(await eventually { running.started.count == 1 })
        queue.cancelAllOperations()
        let result = await last.result()
        #expect((result.failure as? OperationError)?.code == .cancelled)
        #expect(later.isCancelled && last.executions.count == 0)
    }

    @Test("steps that finish on another thread are handed back to the queue")
    func asynchronousSteps() async throws {
        let queue = OperationQueue()
        let hop = { TaskOperation { (value: Int) in value + 1 } }
        let chain = Produce(.success(0), later: true).passesResult(to: AddOne())
            .passesResult(to: hop()).passesResult(to: AddOne()).passesResult(to: hop()).passesResult(to: hop())
        #expect(try await chain.value(on: queue) == 5)
    }

    @Test("a chain dropped before it is enqueued frees its operations")
    func droppedChainFrees() {
        weak var weakFirst: Produce<Int>?
        weak var weakLast: AddOne?
        do {
            let first = Produce(.success(1))
            let last = AddOne()
            weakFirst = first
            weakLast = last
            let chain = first.passesResult(to: AddOne()).passesResult(to: last)
            last.addResultBlock { _ in }
            #expect(chain.operations.count == 3)
        }
        #expect(weakFirst == nil && weakLast == nil)
    }
}

/// Waits on `queue.waitUntilAllOperationsAreFinished()` off the cooperative pool.
func waitUntilAllFinished(_ queue: OperationQueue) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        Thread.detachNewThread {
            blockUntilAllFinished(queue)
            continuation.resume()
        }
    }
}

private func blockUntilAllFinished(_ queue: OperationQueue) {
    queue.waitUntilAllOperationsAreFinished()
}

/// Adds one while counting itself in a gauge shared with other work.
final class Exclusive: ConsumingOperation<Int, Int>, @unchecked Sendable {
    // @unchecked Sendable: the gauge is thread-safe.
    let gauge: Gauge
    init(_ gauge: Gauge) { self.gauge = gauge }
    override func execute(input: Int) {
        gauge.enter()
        usleep(10)
        gauge.leave()
        finish(withResult: input + 1)
    }
}

/// Adds one, noting the most operations its queue held.
final class PendingWatcher: ConsumingOperation<Int, Int>, @unchecked Sendable {
    // @unchecked Sendable: `queue` and `most` are thread-safe.
    let queue: OperationQueue
    let most: Maximum
    init(queue: OperationQueue, most: Maximum) {
        self.queue = queue
        self.most = most
    }
    override func execute(input: Int) {
        most.note(queue.operationCount)
        finish(withResult: input + 1)
    }
}

final class Maximum: Sendable {
    private let state = Guarded(0)
    func note(_ value: Int) { state.withLock { $0 = max($0, value) } }
    var value: Int { state.withLock { $0 } }
}

/// Overrides `execute()` to look at a failed input itself, then passes it on.
final class Inspecting: ConsumingOperation<Int, Int>, @unchecked Sendable {
    // @unchecked Sendable: the counter is thread-safe.
    let sawFailure = Counter()
    override func execute() {
        if case .failure(let error)? = input {
            sawFailure.increment()
            finish(withError: error)
        } else {
            super.execute()
        }
    }
}
