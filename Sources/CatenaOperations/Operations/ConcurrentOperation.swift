import Catena
public import Foundation

/// An operation whose work may finish later, on any thread: override ``execute()``
/// and call `finish()` when the work is done.
///
/// ```swift
/// final class Hello: ConcurrentOperation, @unchecked Sendable {
///     override func execute() {
///         DispatchQueue.global().async { print("Hello"); self.finish() }
///     }
/// }
/// ```
///
/// - `finish()` may be called from any thread; calls after the first do nothing.
/// - An operation cancelled before it starts finishes at once, without `execute()`.
/// - Cancelling a running operation is up to the operation: override
///   ``cancelled()`` to stop the work (and then finish).
///
/// It tells its queue about state changes in the one way that works with both
/// Foundations: `didChangeValue(forKey: "isFinished")` after the flag has flipped. On
/// Linux there is no KVO and only that call reaches the queue; on Apple platforms it is
/// standard KVO.
///
/// Subclasses inherit `@unchecked Sendable` from `Operation`; keep their own mutable
/// state behind a lock, as this class does.
open class ConcurrentOperation: Operation, @unchecked Sendable {
    // @unchecked Sendable: every stored property is either immutable or only touched
    // with `lock` held; Foundation's own state (cancellation, dependencies) is locked by
    // Foundation.

    /// The operation's lock; subclasses in this module keep their state under it too.
    /// (A pthread mutex, not a Mutex: see ``PthreadLock``.)
    let lock = PthreadLock()
    private var stateStorage = State()

    private struct State {
        var phase = Phase.pending
        /// Set by the first `finish`, so that exactly one caller signals the queue.
        var finishClaimed = false
        var cancelHandled = false
        var started: ContinuousClock.Instant?
        var executionTime: Duration?
        var finishHooks: [@Sendable () -> Void] = []
        /// Set once the finish hooks were taken to run: a hook added later runs at once.
        var hooksTaken = false
        /// The chain this operation is a step of, told when `start()` begins and
        /// returns, and when the operation finished.
        var chain: ChainMembership?
    }

    private enum Phase { case pending, executing, finished }

    private func withState<T>(_ body: (inout State) -> T) -> T {
        lock.withLock { body(&stateStorage) }
    }

    public override init() {
        super.init()
    }

    deinit {
        lock.destroy()
    }

    open override var isAsynchronous: Bool { true }
    open override var isExecuting: Bool { withState { $0.phase == .executing } }
    open override var isFinished: Bool { withState { $0.phase == .finished } }

    /// How long the operation ran, from `execute()` to `finish()`; nil until it finished
    /// after executing.
    public var executionTime: Duration? { withState { $0.executionTime } }

    /// Starts the operation; the queue calls this. Do not override: override ``execute()``.
    public final override func start() {
        let cancelled = isCancelled
        let began = withState { state -> Bool in
            guard !cancelled, state.phase == .pending, !state.finishClaimed else { return false }
            state.phase = .executing
            state.started = ContinuousClock.now
            return true
        }
        guard began else {
            if cancelled { finish() }
            return
        }
        willChangeValue(forKey: "isExecuting")
        didChangeValue(forKey: "isExecuting")
        execute()
    }

    /// The operation's work. Call `finish()` when it is done, now or later, from any
    /// thread. The default finishes at once.
    open func execute() {
        finish()
    }

    /// Marks the operation finished and lets the queue start what depends on it.
    /// Only the first call counts.
    public final func finish() {
        finishOnce { self.prepareToFinish() }
    }

    /// Cancels the operation. A pending operation then finishes as soon as its queue
    /// starts it; a running one is told through ``cancelled()``.
    open override func cancel() {
        super.cancel()
        let first = withState { state -> Bool in
            guard !state.cancelHandled, !state.finishClaimed else { return false }
            state.cancelHandled = true
            return true
        }
        if first { cancelled() }
    }

    /// Called once, on the cancelling thread, when the operation is cancelled before it
    /// finished. Override to stop running work; the default does nothing.
    open func cancelled() {}

    /// Claims the finish; if this call wins, runs `prepare` (which sets the result),
    /// flips the state, signals the queue, runs `didFinish()`, then the finish hooks.
    func finishOnce(_ prepare: () -> Void) {
        let (won, wasExecuting) = withState { state -> (Bool, Bool) in
            guard !state.finishClaimed else { return (false, false) }
            state.finishClaimed = true
            return (true, state.phase == .executing)
        }
        guard won else { return }
        prepare()
        // The chain hands the result on and starts or enqueues the next step before
        // this one signals: the queue never sees a gap between two steps.
        if let chain = withState({ $0.chain }) { chain.runner.finished(chain.index) }
        willChangeValue(forKey: "isFinished")
        if wasExecuting { willChangeValue(forKey: "isExecuting") }
        withState { state in
            state.phase = .finished
            if let started = state.started { state.executionTime = ContinuousClock.now - started }
            state.chain = nil
        }
        // Flag first, then the signal: Linux's queue reads `isFinished` on this call.
        if wasExecuting { didChangeValue(forKey: "isExecuting") }
        didChangeValue(forKey: "isFinished")
        didFinish()
        let hooks = withState { state -> [@Sendable () -> Void] in
            state.hooksTaken = true
            defer { state.finishHooks = [] }
            return state.finishHooks
        }
        for hook in hooks { hook() }
    }

    /// Runs once, on the finishing thread, after the operation flipped to finished and
    /// before the finish hooks: a ``ResultOperation`` delivers its result to its result
    /// blocks and delegate here, so that a task waiting in `result()` or `value(on:)`
    /// (resumed by a hook) goes on only after they ran.
    func didFinish() {}

    /// Runs before the operation flips to finished, on the finishing thread, once.
    /// Subclasses in this module fill in a missing result here.
    func prepareToFinish() {}

    /// Makes the operation step `index` of the chain `runner` runs.
    func join(_ runner: ChainRunner, at index: Int) {
        withState { $0.chain = ChainMembership(runner: runner, index: index) }
    }

    /// True for operations that always finish before `execute()` returns; a chain
    /// starts them directly instead of through the queue.
    var finishesWhileStarting: Bool { false }

    /// The error this operation failed with, for a chain's failure policy; nil here.
    var chainFailure: (any Error)? { nil }

    /// Cancels the operation, giving `reason` as its failure if it has a result.
    func cancel(dueTo reason: any Error) {
        cancel()
    }

    /// Runs `hook` once after the operation finished and `didFinish()` ran: on the
    /// finishing thread, or at once if the finish hooks were already taken.
    func onFinish(_ hook: @escaping @Sendable () -> Void) {
        let runNow = withState { state -> Bool in
            guard !state.hooksTaken else { return true }
            state.finishHooks.append(hook)
            return false
        }
        if runNow { hook() }
    }
}

/// An operation's place in a running chain.
struct ChainMembership {
    let runner: ChainRunner
    let index: Int
}

extension Operation {
    /// Runs `hook` once after this operation finished. Catena's operations call it
    /// directly. Another operation is watched by a sentinel that depends on it: its
    /// completion block would lose the hook if the operation finished between the
    /// check and the assignment, or if its owner set a completion block afterwards.
    func whenFinished(_ hook: @escaping @Sendable () -> Void) {
        if let operation = self as? ConcurrentOperation {
            operation.onFinish(hook)
        } else {
            let sentinel = BlockOperation(block: hook)
            sentinel.addDependency(self)
            OperationQueue.finishWatchers.addOperation(sentinel)
        }
    }
}

extension OperationQueue {
    /// Runs the sentinels of ``Operation/whenFinished(_:)`` for operations Catena did
    /// not make.
    static let finishWatchers: OperationQueue = {
        let queue = OperationQueue()
        queue.name = "Catena finish watchers"
        return queue
    }()
}
