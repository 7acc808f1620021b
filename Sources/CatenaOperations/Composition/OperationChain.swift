import Catena
public import Foundation

extension OperationQueue {
    /// The queue `enqueue()` uses when given none (like the shared queue of a QueueManager).
    /// Inject your own queue wherever a method takes `on queue:`.
    public static let catenaDefault: OperationQueue = {
        let queue = OperationQueue()
        queue.name = "Catena.operations"
        return queue
    }()
}

/// What a chain does when one of its operations fails.
public enum ChainFailurePolicy: Sendable {
    /// Run every operation; a failed result passes forward to the end (PeakOperation's rule). A
    /// ``ConsumingOperation`` that receives a failure finishes with it at once.
    case passForward
    /// Cancel every operation after the failed one. They finish at once with the
    /// failure as their result, so the error still reaches the end.
    case cancelRemaining
}

/// Operations that run one after another, built with `then(do:)` and
/// `passesResult(to:)`:
///
/// ```swift
/// let chain = FetchUsers(client: client)
///     .passesResult(to: PickFirst())
///     .passesResult(to: FetchUser(client: client))
/// chain.enqueue()
/// let user = try await chain.value()
/// ```
///
/// A chain schedules each operation when its predecessor finishes, so the queue only
/// ever holds operations that are ready: Linux's OperationQueue takes quadratic time in
/// the number of waiting operations, and a 10,000-step chain added at once takes
/// seconds. It does not add dependencies; an operation belongs to one chain, and only
/// the chain enqueues it. A step that finished cancelled (also by the queue's
/// `cancelAllOperations()`) cancels the steps after it.
///
/// The chain holds its operations until it ran to the end; drop it at any point.
public struct OperationChain<Last: Operation>: Sendable {
    typealias Step = ChainStep

    private let list: StepList
    /// The failure policy.
    public let failurePolicy: ChainFailurePolicy
    /// The chain's last operation: its result is the chain's result.
    public let last: Last
    private let launch = Launch()

    init(list: StepList, last: Last, failurePolicy: ChainFailurePolicy) {
        self.list = list
        self.last = last
        self.failurePolicy = failurePolicy
    }

    var steps: [Step] { list.steps }

    /// The operations, in order.
    public var operations: [Operation] { steps.map(\.operation) }

    /// Runs `next` after this chain's last operation.
    public func then<Next: Operation>(do next: Next) -> OperationChain<Next> {
        OperationChain<Next>(list: list.appending(Step(operation: next, transfer: nil)), last: next, failurePolicy: failurePolicy)
    }

    /// The same chain with another failure policy.
    public func onFailure(_ policy: ChainFailurePolicy) -> OperationChain<Last> {
        OperationChain(list: list, last: last, failurePolicy: policy)
    }

    /// Starts the chain on `queue`. Calling it again does nothing.
    @discardableResult
    public func enqueue(on queue: OperationQueue = .catenaDefault) -> OperationChain<Last> {
        start(on: queue, progress: nil)
        return self
    }

    /// Starts the chain on `queue` and returns its progress: one unit per operation.
    /// Cancelling the progress cancels the chain.
    public func enqueueWithProgress(on queue: OperationQueue = .catenaDefault) -> Progress {
        let progress = Progress(totalUnitCount: Int64(steps.count))
        start(on: queue, progress: progress)
        return progress
    }

    /// Cancels every operation of the chain that has not finished.
    public func cancel() {
        if let runner = launch.runner { runner.cancel() } else { for step in steps.reversed() { step.operation.cancel() } }
    }

    private func start(on queue: OperationQueue, progress: Progress?) {
        guard let runner = launch.begin({ ChainRunner(steps: steps, queue: queue, policy: failurePolicy, progress: progress) }) else { return }
        runner.start()
    }
}

extension OperationChain where Last: ProducesResult {
    /// Runs `next` after the last operation and hands it the last operation's result.
    public func passesResult<Next: ConsumesResult>(to next: Next) -> OperationChain<Next> where Next.Input == Last.Output {
        let producer = last
        let step = Step(operation: next, transfer: { if let output = producer.output { next.input = output } })
        return OperationChain<Next>(list: list.appending(step), last: next, failurePolicy: failurePolicy)
    }
}

extension Operation {
    /// A chain: this operation, then `next`.
    public func then<Next: Operation>(do next: Next) -> OperationChain<Next> {
        asChain().then(do: next)
    }

    /// Adds this operation to `queue` (by default ``Foundation/OperationQueue/catenaDefault``).
    public func enqueue(on queue: OperationQueue = .catenaDefault) {
        queue.addOperation(self)
    }

    /// A chain of this one operation.
    public func asChain() -> OperationChain<Operation> {
        OperationChain(list: StepList(first: .init(operation: self, transfer: nil)), last: self, failurePolicy: .passForward)
    }
}

extension ProducesResult {
    /// A chain: this operation, then `next`, which receives this operation's result.
    public func passesResult<Next: ConsumesResult>(to next: Next) -> OperationChain<Next> where Next.Input == Output {
        OperationChain<Self>(list: StepList(first: .init(operation: self, transfer: nil)), last: self, failurePolicy: .passForward)
            .passesResult(to: next)
    }
}
