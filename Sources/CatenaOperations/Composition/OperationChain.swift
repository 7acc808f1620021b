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
        let steps: Locked<[ChainStep]>
        init(_ steps: [ChainStep]) { self.steps = Locked(steps) }
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
    /// Nil until started; then the runner.
    private let started = Locked<ChainRunner?>(nil)

    var runner: ChainRunner? { started.withLock { $0 } }

    /// Makes and records the runner the first time; nil after that.
    func begin(_ make: () -> ChainRunner) -> ChainRunner? {
        started.withLock { runner in
            guard runner == nil else { return nil }
            runner = make()
            return runner
        }
    }
}

/// Runs a chain: starts each operation when the one before it finished.
///
/// A step's successor is handed to the queue *before* the step tells the queue it
/// finished, so the queue never looks empty between two steps
/// (`waitUntilAllOperationsAreFinished` and `operationCount` stay truthful).
///
/// Steps that are known to finish inside their own `start()` (``TransformOperation``)
/// are not sent through the queue: the step before them starts them directly, while
/// it still holds its slot on the queue and before it signals its own finish, up to
/// ``inlineBurst`` in a row. A trip through Linux's OperationQueue costs a thread
/// wake-up, which would otherwise dominate a chain of small transforms.
/// The queue's limits hold: such steps run in the slot of a step the queue is running.
///
/// A step that finished cancelled (by `cancel()`, by the chain, or by the queue's
/// `cancelAllOperations()`) cancels the steps after it, so that a queue-wide cancel
/// reaches the steps that were not yet on the queue.
///
/// Each step holds the runner until it finished, and the runner holds the steps it has
/// not yet released: a cycle that ends when the last step finishes.
final class ChainRunner: Sendable {
    /// The most steps started directly before one goes through the queue again.
    static let inlineBurst = 64

    private let queue: OperationQueue
    private let policy: ChainFailurePolicy
    private let progress: Progress?
    private let state: Locked<State>

    private struct State {
        var steps: [ChainStep?]
        var stoppedBy: (any Error)?
        /// True while a step's `finished` starts successors directly.
        var driving = false
        /// The next step for the driver to start.
        var pending: ConcurrentOperation?
        var burst = 0
    }

    init(steps: [ChainStep], queue: OperationQueue, policy: ChainFailurePolicy, progress: Progress?) {
        self.queue = queue
        self.policy = policy
        self.progress = progress
        self.state = Locked(State(steps: steps))
    }

    func start() {
        let steps = state.withLock { $0.steps }
        for (index, step) in steps.enumerated() {
            guard let operation = step?.operation else { continue }
            if let concurrent = operation as? ConcurrentOperation {
                concurrent.join(self, at: index)
            } else {
                operation.whenFinished { self.finished(index) }
            }
        }
        progress?.cancellationHandler = { [weak self] in self?.cancel() }
        if let first = steps.first, let first { queue.addOperation(first.operation) }
    }

    func cancel() {
        let pending = state.withLock { state in state.steps.compactMap { $0?.operation } }
        // Last first, so that a step cancelled while running finds its successor
        // already cancelled.
        for operation in pending.reversed() { operation.cancel() }
    }

    /// Step `index` has its result (a Catena operation calls this just before it
    /// signals its finish; others after): apply the failure policy, then start or
    /// enqueue the next step.
    func finished(_ index: Int) {
        progress?.completedUnitCount += 1
        guard let next = advance(past: index) else {
            progress?.cancellationHandler = nil
            return
        }
        guard let direct = next as? ConcurrentOperation, direct.finishesWhileStarting, direct.isReady else {
            queue.addOperation(next)
            return
        }
        enum Plan { case nested, drive, enqueue }
        let plan = state.withLock { state -> Plan in
            if state.burst >= Self.inlineBurst {
                state.burst = 0
                return .enqueue
            }
            state.burst += 1
            if state.driving {
                state.pending = direct
                return .nested
            }
            state.driving = true
            return .drive
        }
        switch plan {
        case .nested:
            return
        case .enqueue:
            queue.addOperation(next)
        case .drive:
            var current: ConcurrentOperation? = direct
            while let operation = current {
                operation.start()
                current = state.withLock { state in
                    defer { state.pending = nil }
                    if state.pending == nil { state.driving = false }
                    return state.pending
                }
            }
        }
    }

    /// Releases step `index`, applies the failure policy, hands the result on; returns
    /// the next step's operation.
    private func advance(past index: Int) -> Operation? {
        let finished = state.withLock { state -> Operation? in
            defer { state.steps[index] = nil }
            return state.steps[index]?.operation
        }
        let concurrent = finished as? ConcurrentOperation
        let failure = concurrent?.chainFailure
        let cancelled = finished?.isCancelled == true
        if cancelled || (policy == .cancelRemaining && failure != nil) {
            let reason: any Error = failure ?? OperationError(.cancelled, operation: "\(type(of: finished))")
            let remaining = state.withLock { state -> [Operation] in
                guard state.stoppedBy == nil else { return [] }
                state.stoppedBy = reason
                return state.steps[(index + 1)...].compactMap { $0?.operation }
            }
            for operation in remaining.reversed() {
                if let concurrent = operation as? ConcurrentOperation {
                    concurrent.cancel(dueTo: reason)
                } else {
                    operation.cancel()
                }
            }
        }
        guard let next = state.withLock({ state in index + 1 < state.steps.count ? state.steps[index + 1] : nil }) else {
            return nil
        }
        next.transfer?()
        return next.operation
    }
}
