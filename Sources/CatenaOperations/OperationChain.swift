public import Foundation
import Synchronization

extension OperationQueue {
    /// The queue `enqueue()` uses when given none (seed 000's shared QueueManager queue).
    /// Inject your own queue wherever a method takes `on queue:`.
    public static let catenaDefault: OperationQueue = {
        let queue = OperationQueue()
        queue.name = "Catena.operations"
        return queue
    }()
}

/// What a chain does when one of its operations fails.
public enum ChainFailurePolicy: Sendable {
    /// Run every operation; a failed result passes forward to the end (seed 003). A
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
/// the chain enqueues it.
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

/// One operation of a chain.
struct ChainStep: Sendable {
    let operation: Operation
    /// Moves the predecessor's result into `operation`, for `passesResult(to:)`.
    let transfer: (@Sendable () -> Void)?
}

/// The steps of a chain, shared by the chains built from one another: appending to
/// the newest chain extends the storage in place (amortized O(1), so building a chain
/// of n operations is O(n)); appending to an older one copies its prefix.
final class StepList: Sendable {
    private let storage: Storage
    private let count: Int

    private final class Storage: Sendable {
        let steps: Mutex<[ChainStep]>
        init(_ steps: [ChainStep]) { self.steps = Mutex(steps) }
    }

    init(first: ChainStep) {
        storage = Storage([first])
        count = 1
    }

    private init(storage: Storage, count: Int) {
        self.storage = storage
        self.count = count
    }

    var steps: [ChainStep] { storage.steps.withLock { Array($0.prefix(count)) } }

    func appending(_ step: ChainStep) -> StepList {
        let extended = storage.steps.withLock { steps -> Bool in
            guard steps.count == count else { return false }
            steps.append(step)
            return true
        }
        if extended { return StepList(storage: storage, count: count + 1) }
        return StepList(storage: Storage(steps + [step]), count: count + 1)
    }
}

/// Remembers whether a chain (and its copies) has been started.
private final class Launch: Sendable {
    private let runnerBox = Mutex<ChainRunner?>(nil)
    private let started = Mutex(false)

    var runner: ChainRunner? { runnerBox.withLock { $0 } }

    /// Makes and records the runner the first time; nil after that.
    func begin(_ make: () -> ChainRunner) -> ChainRunner? {
        let first = started.withLock { started -> Bool in
            defer { started = true }
            return !started
        }
        guard first else { return nil }
        let runner = make()
        runnerBox.withLock { $0 = runner }
        return runner
    }
}

/// Runs a chain: starts each operation when the one before it finished.
///
/// A step that finishes later (a network call) has its successor added to the queue.
/// A step that finishes synchronously, inside its own `start()` on a queue thread, has
/// its successor started right there, after that `start()` returns its work, up to
/// ``inlineBurst`` steps in a row: a trip through Linux's OperationQueue costs a thread
/// wake-up (about 6 µs), which would otherwise dominate a chain of small steps. Steps
/// started this way still run one at a time, on a thread of the queue, while the
/// queue's slot is held; a serial queue (`maxConcurrentOperationCount == 1`, the main
/// queue) always goes through the queue, as does a step that is not ready (a
/// dependency added by hand) or is not a ``ConcurrentOperation``.
///
/// Each operation's finish hook holds the runner, and the runner holds the operations
/// it has not yet released: a cycle that ends when the last operation finishes.
final class ChainRunner: Sendable {
    /// The most steps started inline before one goes through the queue again.
    static let inlineBurst = 64

    private let queue: OperationQueue
    private let inline: Bool
    private let policy: ChainFailurePolicy
    private let progress: Progress?
    private let state: Mutex<State>

    private struct State {
        var steps: [ChainStep?]
        var cancelled = false
        var stoppedBy: (any Error)?
        /// How many of this chain's `start()` calls are on the stack.
        var depth = 0
        /// A step to start when the outermost `start()` returns.
        var pending: ConcurrentOperation?
        var burst = 0
    }

    init(steps: [ChainStep], queue: OperationQueue, policy: ChainFailurePolicy, progress: Progress?) {
        self.queue = queue
        self.inline = queue.maxConcurrentOperationCount != 1
        self.policy = policy
        self.progress = progress
        self.state = Mutex(State(steps: steps))
    }

    func start() {
        let steps = state.withLock { $0.steps }
        for (index, step) in steps.enumerated() {
            guard let operation = step?.operation else { continue }
            if let concurrent = operation as? ConcurrentOperation {
                if !concurrent.join(self, at: index) { finished(index) }
            } else {
                operation.whenFinished { self.finished(index) }
            }
        }
        progress?.cancellationHandler = { [weak self] in self?.cancel() }
        if let first = steps.first, let first { queue.addOperation(first.operation) }
    }

    func cancel() {
        let pending = state.withLock { state -> [Operation] in
            state.cancelled = true
            return state.steps.compactMap { $0?.operation }
        }
        // Last first, so that a step cancelled while running finds its successor
        // already cancelled.
        for operation in pending.reversed() { operation.cancel() }
    }

    func willStart() {
        state.withLock { $0.depth += 1 }
    }

    func didReturnFromStart() {
        var next = leaveStart()
        while let operation = next {
            operation.start()
            next = leaveStart()
        }
    }

    /// One `start()` returned; if it was the outermost and a successor waits, claims it
    /// for the caller, which then counts as a `start()` on the stack until it calls this
    /// again.
    private func leaveStart() -> ConcurrentOperation? {
        state.withLock { state in
            state.depth -= 1
            guard state.depth == 0, let pending = state.pending else { return nil }
            state.pending = nil
            state.depth = 1
            return pending
        }
    }

    /// Step `index` finished: apply the failure policy, then start or enqueue the next.
    func finished(_ index: Int) {
        progress?.completedUnitCount += 1
        let (next, cancelNow, reason) = state.withLock { state -> (ChainStep?, [Operation], (any Error)?) in
            let step = state.steps[index]
            state.steps[index] = nil
            var cancelNow: [Operation] = []
            if policy == .cancelRemaining, state.stoppedBy == nil, let failure = (step?.operation as? ConcurrentOperation)?.chainFailure {
                state.stoppedBy = failure
                cancelNow = state.steps[(index + 1)...].compactMap { $0?.operation }
            }
            let next = index + 1 < state.steps.count ? state.steps[index + 1] : nil
            return (next, cancelNow, state.stoppedBy)
        }
        if let reason {
            for operation in cancelNow {
                if let concurrent = operation as? ConcurrentOperation {
                    concurrent.cancel(dueTo: reason)
                } else {
                    operation.cancel()
                }
            }
        }
        guard let next else {
            progress?.cancellationHandler = nil
            return
        }
        next.transfer?()
        if inline, let concurrent = next.operation as? ConcurrentOperation, concurrent.isReady {
            let deferred = state.withLock { state -> Bool in
                guard state.depth > 0, state.burst < Self.inlineBurst else {
                    state.burst = 0
                    return false
                }
                state.burst += 1
                state.pending = concurrent
                return true
            }
            if deferred { return }
        }
        queue.addOperation(next.operation)
    }
}

