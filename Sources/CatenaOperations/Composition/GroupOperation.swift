import Catena
public import Foundation

/// Runs a chain or a set of operations on its own internal queue and produces their
/// combined result (TWGOperations' group, PeakOperation's GroupChainOperation).
///
/// Cancelling the group cancels its children; the group then fails with
/// ``OperationError/Code/cancelled``.
///
/// ```swift
/// let sizes = GroupOperation.collecting(photos.map { GetSizesOperation($0) }, maxConcurrent: 8)
/// sizes.addResultBlock { results in … }   // one Result per photo, in order
/// ```
public final class GroupOperation<Output: Sendable>: ResultOperation<Output>, @unchecked Sendable {
    // @unchecked Sendable: `run` and `stop` are immutable Sendable closures; the internal
    // queue is thread-safe.
    private let run: @Sendable (OperationQueue, @escaping @Sendable (Result<Output, any Error>) -> Void) -> Void
    private let stop: @Sendable () -> Void
    private let internalQueue = OperationQueue()

    private init(
        maxConcurrent: Int,
        run: @escaping @Sendable (OperationQueue, @escaping @Sendable (Result<Output, any Error>) -> Void) -> Void,
        stop: @escaping @Sendable () -> Void
    ) {
        self.run = run
        self.stop = stop
        super.init()
        internalQueue.maxConcurrentOperationCount = max(1, maxConcurrent)
        internalQueue.name = "Catena.group"
    }

    /// A group that runs `chain` and produces its last operation's result.
    public convenience init<Last: ProducesResult>(chain: OperationChain<Last>) where Last.Output == Output {
        self.init(
            maxConcurrent: OperationQueue.defaultMaxConcurrentOperationCount,
            run: { queue, done in
                let last = chain.last
                last.whenFinished { done(last.output ?? .failure(OperationError(.noResult, operation: "\(Last.self)"))) }
                chain.enqueue(on: queue)
            },
            stop: { chain.cancel() }
        )
    }

    public override func execute() {
        run(internalQueue) { [self] result in
            if isCancelled { finish() } else { finish(with: result) }
        }
    }

    public override func cancelled() {
        stop()
    }
}

extension GroupOperation {
    /// A group that runs `operations`, at most `maxConcurrent` at once, and produces one
    /// `Result` per operation, in their order. Failures do not stop the others.
    public static func collecting<Element: Sendable>(
        _ operations: [ResultOperation<Element>],
        maxConcurrent: Int = OperationQueue.defaultMaxConcurrentOperationCount
    ) -> GroupOperation<[Result<Element, any Error>]> where Output == [Result<Element, any Error>] {
        running(operations, maxConcurrent: maxConcurrent) { .success($0) }
    }

    /// A group that runs `operations`, at most `maxConcurrent` at once, and produces all
    /// their values in order, or fails with the first failure (by position) after all
    /// have finished.
    public static func all<Element: Sendable>(
        _ operations: [ResultOperation<Element>],
        maxConcurrent: Int = OperationQueue.defaultMaxConcurrentOperationCount
    ) -> GroupOperation<[Element]> where Output == [Element] {
        running(operations, maxConcurrent: maxConcurrent) { results in Result { try results.map { try $0.get() } } }
    }

    /// A group that runs `operations` on its queue and, once every one finished,
    /// produces `combine` of their results in order.
    private static func running<Element: Sendable>(
        _ operations: [ResultOperation<Element>],
        maxConcurrent: Int,
        combine: @escaping @Sendable ([Result<Element, any Error>]) -> Result<Output, any Error>
    ) -> GroupOperation<Output> {
        GroupOperation(
            maxConcurrent: maxConcurrent,
            run: { queue, done in
                let remaining = Locked(operations.count)
                guard !operations.isEmpty else { return done(combine([])) }
                for operation in operations {
                    operation.whenFinished {
                        let last = remaining.withLock { count -> Bool in
                            count -= 1
                            return count == 0
                        }
                        if last { done(combine(operations.map { $0.output ?? .failure(OperationError(.noResult, operation: $0.label)) })) }
                    }
                }
                queue.addOperations(operations, waitUntilFinished: false)
            },
            // Last first: cancelling a running child frees a slot, and the queue must
            // find the children behind it already cancelled.
            stop: { for operation in operations.reversed() { operation.cancel() } }
        )
    }
}

extension OperationChain where Last: ProducesResult {
    /// A group operation that runs this chain on its own queue.
    public func group() -> GroupOperation<Last.Output> {
        GroupOperation(chain: self)
    }
}
