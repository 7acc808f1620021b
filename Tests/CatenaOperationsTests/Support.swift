import CatenaOperations
import Foundation

/// A value behind an NSLock. The tests lock with NSLock rather than Mutex because
/// ThreadSanitizer misses Mutex's contended path on Linux (false races); see
/// CatenaOperations' `Locked`.
final class Guarded<Value>: @unchecked Sendable {
    // @unchecked Sendable: `value` is only touched with `lock` held.
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

/// Counts calls from any thread.
final class Counter: Sendable {
    private let value = Guarded(0)
    func increment() { value.withLock { $0 += 1 } }
    var count: Int { value.withLock { $0 } }
}

/// Keeps values from any thread, in arrival order.
final class Recorder<Value: Sendable>: Sendable {
    private let values = Guarded<[Value]>([])
    func append(_ value: Value) { values.withLock { $0.append(value) } }
    var all: [Value] { values.withLock { $0 } }
}

struct TestFailure: Error, Equatable {
    let tag: String
}

/// Produces a fixed result, after an optional hop to another thread.
final class Produce<Output: Sendable>: ResultOperation<Output>, @unchecked Sendable {
    // @unchecked Sendable: immutable state only.
    let result: Result<Output, any Error>
    let later: Bool
    let executions = Counter()

    init(_ result: Result<Output, any Error>, later: Bool = false) {
        self.result = result
        self.later = later
    }

    override func execute() {
        executions.increment()
        if later {
            DispatchQueue.global().asyncAfter(deadline: .now() + 0.01) { self.finish(with: self.result) }
        } else {
            finish(with: result)
        }
    }
}

/// Adds one to its input, counting how often it ran.
final class AddOne: ConsumingOperation<Int, Int>, @unchecked Sendable {
    // @unchecked Sendable: the counter is thread-safe.
    let executions = Counter()
    override func execute(input: Int) {
        executions.increment()
        finish(withResult: input + 1)
    }
}

/// Runs until cancelled, then finishes.
final class UntilCancelled: ResultOperation<Int>, @unchecked Sendable {
    // @unchecked Sendable: the counters are thread-safe.
    let started = Counter()
    let cancelCalls = Counter()
    override func execute() { started.increment() }
    override func cancelled() {
        cancelCalls.increment()
        if isExecuting { finish() }
    }
}

/// Waits until `condition` holds, polling; false after `seconds`.
func eventually(seconds: Double = 15, _ condition: () -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return condition()
}

/// The result `operation` finishes with, waiting for it without enqueueing.
func finished<Output>(_ operation: ResultOperation<Output>) async -> Result<Output, any Error> {
    await operation.result()
}

extension Result {
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }

    var success: Success? { try? get() }
}
