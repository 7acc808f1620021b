import CatenaOperations
import Foundation
import Testing

@Suite("Groups")
struct GroupOperationTests {
    @Test("a group runs a chain on its own queue and produces the chain's result")
    func chainGroup() async throws {
        let group = Produce(.success(10)).passesResult(to: AddOne()).group()
        let after = group.passesResult(to: AddOne())
        #expect(try await after.value(on: OperationQueue()) == 12)
    }

    @Test("collecting: results in order, at most maxConcurrent at once, failures kept")
    func collecting() async throws {
        let gauge = Gauge()
        let children = (0..<12).map { index in
            TaskOperation { () async throws -> Int in
                gauge.enter()
                defer { gauge.leave() }
                try await Task.sleep(for: .milliseconds(5))
                if index == 4 { throw TestFailure(tag: "four") }
                return index * index
            }
        }
        let group = GroupOperation.collecting(children, maxConcurrent: 3)
        let results = try await group.value(on: OperationQueue())
        #expect(results.count == 12)
        #expect(results.map(\.success) == (0..<12).map { $0 == 4 ? nil : $0 * $0 })
        #expect(results[4].failure as? TestFailure == TestFailure(tag: "four"))
        #expect(gauge.most <= 3 && gauge.most >= 1)
    }

    @Test("all: every value, or the first failure by position")
    func allOrFirstFailure() async throws {
        let values = try await GroupOperation.all([Produce(.success(1)), Produce(.success(2))]).value(on: OperationQueue())
        #expect(values == [1, 2])
        let failing = GroupOperation.all([Produce(.success(1)), Produce<Int>(.failure(TestFailure(tag: "b"))), Produce<Int>(.failure(TestFailure(tag: "c")))])
        await #expect(throws: TestFailure(tag: "b")) { try await failing.value(on: OperationQueue()) }
    }

    @Test("cancelling a group cancels its children and fails the group")
    func cancelGroup() async {
        let children = (0..<4).map { _ in UntilCancelled() }
        let group = GroupOperation.collecting(children, maxConcurrent: 2)
        group.enqueue(on: OperationQueue())
        #expect(await eventually { children.map(\.started.count).reduce(0, +) == 2 })
        group.cancel()
        let result = await group.result()
        #expect((result.failure as? OperationError)?.code == .cancelled)
        #expect(children.allSatisfy { $0.isCancelled && $0.isFinished })
        #expect(children.map(\.started.count).reduce(0, +) == 2, "no child starts after the cancel")
    }

    @Test("an empty group succeeds with no results")
    func emptyGroup() async throws {
        let results = try await GroupOperation<[Result<Int, any Error>]>.collecting([Produce<Int>]()).value(on: OperationQueue())
        #expect(results.isEmpty)
    }
}

@Suite("Retrying operations")
struct RetryingOperationTests {
    /// An attempt factory that fails the first `failures` attempts.
    static func attempts(failing failures: Int, made: Recorder<ResultOperation<String>>) -> @Sendable (Int) -> ResultOperation<String> {
        { number in
            let operation = Produce<String>(number <= failures ? .failure(TestFailure(tag: "attempt \(number)")) : .success("attempt \(number)"))
            made.append(operation)
            return operation
        }
    }

    @Test("none: one attempt")
    func none() async {
        let made = Recorder<ResultOperation<String>>()
        let operation = RetryingOperation(strategy: .none, makeAttempt: Self.attempts(failing: 1, made: made))
        await #expect(throws: TestFailure(tag: "attempt 1")) { try await operation.value(on: OperationQueue()) }
        #expect(operation.attempts == 1)
    }

    @Test("repeat(times:): up to that many attempts, each a fresh operation")
    func repeatTimes() async throws {
        let made = Recorder<ResultOperation<String>>()
        let succeeds = RetryingOperation(strategy: .repeat(times: 3), makeAttempt: Self.attempts(failing: 2, made: made))
        #expect(try await succeeds.value(on: OperationQueue()) == "attempt 3")
        #expect(succeeds.attempts == 3)
        #expect(Set(made.all.map(ObjectIdentifier.init)).count == 3)

        let exhausted = RetryingOperation(strategy: .repeat(times: 3), makeAttempt: Self.attempts(failing: 5, made: Recorder()))
        await #expect(throws: TestFailure(tag: "attempt 3")) { try await exhausted.value(on: OperationQueue()) }
        #expect(exhausted.attempts == 3)
    }

    @Test("the strategy decides by the error")
    func decidesByError() async {
        let strategy = OperationRetryStrategy.repeat(times: 5, if: { ($0 as? TestFailure)?.tag != "attempt 2" })
        let operation = RetryingOperation(strategy: strategy, makeAttempt: Self.attempts(failing: 4, made: Recorder()))
        await #expect(throws: TestFailure(tag: "attempt 2")) { try await operation.value(on: OperationQueue()) }
        #expect(operation.attempts == 2)
    }

    @Test("backoff waits between attempts: constant, and exponential with jitter within its cap")
    func backoff() async throws {
        let constant = RetryingOperation(
            strategy: .backoff(maxAttempts: 3, delay: .constant(.milliseconds(30))),
            makeAttempt: Self.attempts(failing: 2, made: Recorder())
        )
        let start = ContinuousClock.now
        #expect(try await constant.value(on: OperationQueue()) == "attempt 3")
        #expect(ContinuousClock.now - start >= .milliseconds(60), "two waits of 30 ms")

        let plain = OperationRetryStrategy.Backoff.exponential(initial: .milliseconds(10), maximum: .milliseconds(50), jitter: false)
        #expect((1...5).map { plain.wait(after: $0) } == [.milliseconds(10), .milliseconds(20), .milliseconds(40), .milliseconds(50), .milliseconds(50)])
        let jittered = OperationRetryStrategy.Backoff.exponential(initial: .milliseconds(10), maximum: .milliseconds(50))
        let waits = (0..<200).map { _ in jittered.wait(after: 3) }
        #expect(waits.allSatisfy { $0 >= .zero && $0 <= .milliseconds(40) })
        #expect(Set(waits).count > 1, "jitter varies the wait")
    }

    @Test("cancelling during the wait starts no other attempt", .timeLimit(.minutes(1)))
    func cancelDuringWait() async {
        let made = Recorder<ResultOperation<String>>()
        let operation = RetryingOperation(
            // A wait no stalled test runner outlasts: a ten-second one once ran out while a
            // sanitized full suite held this task off its threads, and a second attempt
            // started before the cancel was sent.
            strategy: .backoff(maxAttempts: 5, delay: .constant(.seconds(3_600))),
            makeAttempt: Self.attempts(failing: 5, made: made)
        )
        operation.enqueue(on: OperationQueue())
        #expect(await eventually { made.all.count == 1 })
        operation.cancel()
        let result = await operation.result()
        #expect((result.failure as? OperationError)?.code == .cancelled)
        #expect(made.all.count == 1)
    }

    @Test("cancelling during the wait lets go of the operation at once, not when the wait would have ended")
    func cancelReleasesWait() async {
        weak var released: RetryingOperation<String>?
        do {
            let operation = RetryingOperation(
                strategy: .backoff(maxAttempts: 5, delay: .constant(.seconds(3_600))),
                makeAttempt: Self.attempts(failing: 5, made: Recorder())
            )
            released = operation
            operation.enqueue(on: OperationQueue())
            #expect(await eventually { operation.attempts == 1 })
            operation.cancel()
            #expect((await operation.result().failure as? OperationError)?.code == .cancelled)
        }
        // An hour-long wait that still held the operation would keep it alive.
        #expect(await eventually { released == nil }, "the cancelled wait still holds the operation")
    }

    @Test("cancelling cancels the attempt in flight")
    func cancelAttempt() async {
        let current = Guarded<UntilCancelled?>(nil)
        let operation = RetryingOperation(strategy: .repeat(times: 3)) { _ in
            let attempt = UntilCancelled()
            current.withLock { $0 = attempt }
            return attempt
        }
        operation.enqueue(on: OperationQueue())
        #expect(await eventually { current.withLock { $0 } != nil })
        operation.cancel()
        _ = await operation.result()
        #expect(current.withLock { $0 }?.isCancelled == true)
        #expect(operation.attempts == 1)
    }
}

/// Counts how many are inside at once.
final class Gauge: Sendable {
    private let state = Guarded((now: 0, most: 0))
    func enter() {
        state.withLock {
            $0.now += 1; $0.most = max($0.most, $0.now)
        }
    }
    func leave() { state.withLock { $0.now -= 1 } }
    var most: Int { state.withLock { $0.most } }
}
