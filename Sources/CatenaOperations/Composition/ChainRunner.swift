import Catena
import Foundation

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
final class Launch: Sendable {
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
