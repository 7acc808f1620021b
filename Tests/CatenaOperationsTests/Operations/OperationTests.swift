import CatenaOperations
import Foundation
import Testing

@Suite("The asynchronous operation base")
struct OperationBaseTests {
    @Test("finish from another thread lets a hand-wired dependent run (the queue hears it on Linux)")
    func finishFromAnotherThread() async {
        let queue = OperationQueue()
        let first = Produce(.success(1), later: true)
        let ran = Counter()
        let second = BlockOperation { ran.increment() }
        second.addDependency(first)
        for operation in [first, second] { queue.addOperation(operation) }
        let done = await eventually { second.isFinished }
        #expect(done, "the dependent never ran: the queue missed the finish")
        #expect(ran.count == 1)
        #expect(first.output?.success == 1)
        #expect(!first.isExecuting)
    }

    @Test("an operation cancelled before it starts finishes at once, without executing")
    func cancelBeforeStart() async {
        let queue = OperationQueue()
        let operation = Produce(.success(1))
        let dependent = BlockOperation {}
        dependent.addDependency(operation)
        operation.cancel()
        for step in [operation, dependent] { queue.addOperation(step) }
        let result = await finished(operation)
        #expect(operation.executions.count == 0)
        #expect((result.failure as? OperationError)?.code == .cancelled)
        #expect(await eventually { dependent.isFinished })
    }

    @Test("cancelling a running operation tells it once, and it finishes")
    func cancelWhileRunning() async {
        let operation = UntilCancelled()
        operation.enqueue(on: OperationQueue())
        #expect(await eventually { operation.started.count == 1 })
        operation.cancel()
        operation.cancel()
        let result = await finished(operation)
        #expect(operation.cancelCalls.count == 1)
        #expect((result.failure as? OperationError)?.code == .cancelled)
        #expect(operation.isFinished && !operation.isExecuting)
    }

    @Test("finishing twice keeps the first result and calls back once")
    func doubleFinish() async {
        let operation = TwiceFinishing()
        let calls = Recorder<Int?>()
        operation.addResultBlock { calls.append($0.success) }
        operation.enqueue(on: OperationQueue())
        #expect(await finished(operation).success == 1)
        #expect(calls.all == [1])
        operation.finish(withResult: 3)
        #expect(operation.output?.success == 1)
        #expect(calls.all == [1])
    }

    @Test("finishing without a result is a clear failure")
    func finishWithoutResult() async {
        let operation = ResultOperation<Int>()
        operation.enqueue(on: OperationQueue())
        let error = await finished(operation).failure as? OperationError
        #expect(error?.code == .noResult)
        #expect(error?.description.contains("finish(withResult:)") == true)
    }

    @Test("result blocks run exactly once, also when added after the finish or on cancel")
    func resultBlocksOnce() async {
        let succeeded = Produce(.success(7))
        let cancelled = Produce<Int>(.success(1))
        let early = Counter(), late = Counter(), onCancel = Counter()
        succeeded.addResultBlock { _ in early.increment() }
        cancelled.addResultBlock { _ in onCancel.increment() }
        cancelled.cancel()
        let queue = OperationQueue()
        queue.addOperation(succeeded)
        queue.addOperation(cancelled)
        _ = await succeeded.result()
        _ = await cancelled.result()
        succeeded.addResultBlock { _ in late.increment() }
        #expect(await eventually { early.count == 1 && late.count == 1 && onCancel.count == 1 })
        try? await Task.sleep(for: .milliseconds(20))
        #expect(early.count == 1 && late.count == 1 && onCancel.count == 1)
    }

    @Test("a task waiting in result() or value(on:) goes on only after the result blocks ran")
    func waitersAfterResultBlocks() async throws {
        let queue = OperationQueue()
        for _ in 0..<10 {
            // Each block takes 20 ms on the finishing thread: a waiter resumed before the
            // blocks (as one was, by the finish hooks) reads its count well within that.
            let waited = Produce(.success(3), later: true)
            let valued = Produce(.success(4), later: true)
            let ran = Counter()
            for operation in [waited, valued] {
                operation.addResultBlock { _ in
                    Thread.sleep(forTimeInterval: 0.02)
                    ran.increment()
                }
            }
            queue.addOperation(waited)
            _ = await waited.result()
            #expect(ran.count == 1, "result() went on before the result block ran")
            #expect(try await valued.value(on: queue) == 4)
            #expect(ran.count == 2, "value(on:) went on before the result block ran")
        }
    }

    @Test("the delegate hears did-complete or did-fail, once, and is held weakly")
    func delegateCallbacks() async {
        let delegate = RecordingDelegate()
        let good = Produce(.success("ok")), bad = Produce<String>(.failure(TestFailure(tag: "bad")))
        good.delegate = delegate
        bad.delegate = delegate
        let queue = OperationQueue()
        queue.addOperation(good)
        queue.addOperation(bad)
        _ = await good.result()
        _ = await bad.result()
        good.finish(withResult: "again")
        #expect(await eventually { delegate.events.all.count == 2 })
        #expect(Set(delegate.events.all) == ["complete ok", "fail bad"])

        var transient: RecordingDelegate? = RecordingDelegate()
        weak let weakDelegate = transient
        good.delegate = transient
        transient = nil
        #expect(weakDelegate == nil)
        #expect(good.delegate == nil)
    }

    @Test("hand-wired addDependency passes a producer's result to a consumer")
    func handWiredResult() async {
        let producer = Produce(.success(41), later: true)
        let consumer = AddOne()
        consumer.addDependency(producer)
        let queue = OperationQueue()
        queue.addOperation(producer)
        queue.addOperation(consumer)
        #expect(await finished(consumer).success == 42)
    }

    @Test("a consumer with nothing to consume says so")
    func missingInput() async {
        let consumer = AddOne()
        consumer.enqueue(on: OperationQueue())
        let error = await finished(consumer).failure as? OperationError
        #expect(error?.code == .missingInput)
        #expect(consumer.executions.count == 0)
    }

    @Test("a transform's thrown error becomes its failure")
    func transformThrows() async throws {
        let transform = TransformOperation { (value: Int) throws -> Int in
            if value < 0 { throw TestFailure(tag: "negative") }
            return value * 2
        }
        transform.input = .success(-1)
        await #expect(throws: TestFailure(tag: "negative")) { try await transform.value(on: OperationQueue()) }
    }
}

final class TwiceFinishing: ResultOperation<Int>, @unchecked Sendable {
    // @unchecked Sendable: no state of its own.
    override func execute() {
        DispatchQueue.global().async {
            self.finish(withResult: 1)
            self.finish(withResult: 2)
            self.finish(withError: TestFailure(tag: "late"))
        }
    }
}

final class RecordingDelegate: OperationDelegate {
    let events = Recorder<String>()
    func operationDidComplete(_ operation: Operation, withResult result: any Sendable) {
        events.append("complete \(result)")
    }
    func operationDidFail(_ operation: Operation, withError error: any Error) {
        events.append("fail \((error as? TestFailure)?.tag ?? "\(error)")")
    }
}
