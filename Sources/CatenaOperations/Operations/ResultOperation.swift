public import Foundation
import Catena

/// An operation that produces a `Result`.
public protocol ProducesResult<Output>: Operation {
    associatedtype Output: Sendable
    /// The result; nil until the operation finished.
    var output: Result<Output, any Error>? { get }
}

/// An operation that consumes its predecessor's `Result`.
public protocol ConsumesResult<Input>: Operation {
    associatedtype Input: Sendable
    /// The result handed in; set by ``ProducesResult/passesResult(to:)`` before the
    /// operation starts, or read from a producing dependency when it starts.
    var input: Result<Input, any Error>? { get set }
}

/// Told once when an operation completes or fails (TWGOperations' delegate).
///
/// The operation keeps its delegate weakly. Calls come on the finishing thread.
public protocol OperationDelegate: AnyObject, Sendable {
    /// The operation finished with a value.
    func operationDidComplete(_ operation: Operation, withResult result: any Sendable)
    /// The operation finished with an error (including cancellation).
    func operationDidFail(_ operation: Operation, withError error: any Error)
}

/// Why an operation has no value.
public struct OperationError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: Sendable, Equatable {
        /// The operation was cancelled before it produced a result.
        case cancelled
        /// The operation finished without setting a result.
        case noResult
        /// The operation needs an input and none was passed to it.
        case missingInput
    }

    public let code: Code
    /// The operation's type, for the message.
    public let operation: String

    public init(_ code: Code, operation: String) {
        self.code = code
        self.operation = operation
    }

    public var description: String {
        switch code {
        case .cancelled: "\(operation) was cancelled"
        case .noResult: "\(operation) finished without a result (call finish(withResult:) or finish(withError:))"
        case .missingInput: "\(operation) has no input: pass it one with passesResult(to:), or add a dependency that produces \(operation)'s input type"
        }
    }

    /// Whether `error` is a cancellation: of an operation, of a task, or of a request
    /// (`CatenaError` with code `cancelled`, as an ``EndpointOperation`` cancelled in
    /// flight reports).
    public static func isCancellation(_ error: any Error) -> Bool {
        (error as? OperationError)?.code == .cancelled || error is CancellationError || (error as? CatenaError)?.code == .cancelled
    }
}

/// A ``ConcurrentOperation`` that produces a `Result<Output, any Error>`: finish it with
/// ``finish(withResult:)``, ``finish(withError:)`` or ``finish(with:)``.
///
/// Result blocks and the delegate are called exactly once, after the operation finished.
/// Those added before the finish run on the finishing thread, before a task waiting in
/// `result()` or `value(on:)` goes on; one added later runs at once, on the adding thread.
/// A result block must therefore not wait for such a task, or for the operation's
/// group or chain to finish: they go on only after it returns. An operation cancelled
/// before it produced a result fails with ``OperationError/Code/cancelled`` (or with the
/// upstream error that cancelled it).
open class ResultOperation<Output: Sendable>: ConcurrentOperation, ProducesResult, @unchecked Sendable {
    // @unchecked Sendable: the mutable stored properties below are only touched with
    // the operation's `lock` held. (Plain stored properties, not a locked struct: from
    // unspecialized generic code every access to a lock-wrapped generic payload looks
    // up its type metadata.)
    private var storedOutput: Result<Output, any Error>?
    private var cancellationReason: (any Error)?
    private weak var storedDelegate: (any OperationDelegate)?
    private var resultBlocks: [@Sendable (Result<Output, any Error>) -> Void] = []
    private var delivered = false
    /// The error the operation finished with: kept apart from `storedOutput` so that a
    /// chain can check for failure without touching the generic value.
    private var finishedWithError: (any Error)?

    public override init() {
        super.init()
    }

    /// The result; nil until the operation finished.
    public var output: Result<Output, any Error>? { lock.withLock { storedOutput } }

    /// Told once when the operation completes or fails; held weakly.
    public var delegate: (any OperationDelegate)? {
        get { lock.withLock { storedDelegate } }
        set { lock.withLock { storedDelegate = newValue } }
    }

    /// Finishes with `value`. Only the first finish counts.
    public final func finish(withResult value: Output) {
        finish(with: .success(value))
    }

    /// Finishes with `error`. Only the first finish counts.
    public final func finish(withError error: any Error) {
        finish(with: .failure(error))
    }

    /// Finishes with `result`. Only the first finish counts.
    public final func finish(with result: Result<Output, any Error>) {
        finishOnce {
            let error: (any Error)? = if case .failure(let error) = result { error } else { nil }
            lock.withLock {
                storedOutput = result
                finishedWithError = error
            }
        }
    }

    /// Runs `block` exactly once with the result: after the operation finished, or at
    /// once if it already has.
    public final func addResultBlock(_ block: @escaping @Sendable (Result<Output, any Error>) -> Void) {
        let now = lock.withLock { () -> Result<Output, any Error>? in
            guard delivered else {
                resultBlocks.append(block)
                return nil
            }
            return storedOutput
        }
        if let now { block(now) }
    }

    /// The operation's name in messages: its `name`, or its type.
    var label: String { name ?? String(describing: type(of: self)) }

    /// Cancels the operation and, if it has no result yet, makes `reason` its failure.
    override func cancel(dueTo reason: any Error) {
        lock.withLock { if cancellationReason == nil { cancellationReason = reason } }
        cancel()
    }

    /// The error this operation finished with, if it failed.
    override var chainFailure: (any Error)? {
        lock.withLock { finishedWithError }
    }

    override func prepareToFinish() {
        guard lock.withLock({ storedOutput == nil }) else { return }
        let missing: any Error =
            isCancelled
            ? (lock.withLock { cancellationReason } ?? upstreamFailure ?? OperationError(.cancelled, operation: label))
            : OperationError(.noResult, operation: label)
        // Only `finishOnce`'s winner gets here, so nothing sets the output in between.
        lock.withLock {
            storedOutput = .failure(missing)
            finishedWithError = missing
        }
    }

    /// A failure handed in from upstream; consumers override.
    var upstreamFailure: (any Error)? { nil }

    override func didFinish() {
        let (blocks, delegate) = lock.withLock {
            delivered = true
            defer { resultBlocks = [] }
            return (resultBlocks, storedDelegate)
        }
        // Most operations in a chain have neither: leave the result untouched then.
        guard !blocks.isEmpty || delegate != nil, let output else { return }
        for block in blocks { block(output) }
        guard let delegate else { return }
        switch output {
        case .success(let value): delegate.operationDidComplete(self, withResult: value)
        case .failure(let error): delegate.operationDidFail(self, withError: error)
        }
    }
}

/// A ``ResultOperation`` that consumes an input: override ``execute(input:)``, which
/// runs with the input's value.
///
/// When the input is a failure, the operation does not call `execute(input:)`: it
/// finishes at once with that failure, so an error passes forward to the end of a chain
/// (PeakOperation's rule) and reaches whoever reads the last result. Override ``execute()``
/// instead to see failed inputs.
///
/// The input comes from ``ProducesResult/passesResult(to:)``, or, for operations wired
/// by hand with `addDependency`, from the last dependency that produces `Input`.
open class ConsumingOperation<Input: Sendable, Output: Sendable>: ResultOperation<Output>, ConsumesResult, @unchecked Sendable {
    // @unchecked Sendable: `storedInput` is only touched with the operation's `lock`
    // held (a plain stored property, for the reason ResultOperation gives).
    private var storedInput: Result<Input, any Error>?

    public override init() {
        super.init()
    }

    /// The input; set before the operation starts.
    public var input: Result<Input, any Error>? {
        get { lock.withLock { storedInput } }
        set { lock.withLock { storedInput = newValue } }
    }

    /// Unwraps the input and calls ``execute(input:)``, or finishes with the input's
    /// failure (or ``OperationError/Code/missingInput``).
    open override func execute() {
        switch resolvedInput() {
        case .success(let value): execute(input: value)
        case .failure(let error): finish(withError: error)
        }
    }

    /// The work, given the input's value. Finish with a result when done.
    open func execute(input: Input) {
        finish(withError: OperationError(.noResult, operation: label))
    }

    /// The input, or the result of the last dependency that produces `Input`.
    public final func resolvedInput() -> Result<Input, any Error> {
        if let input { return input }
        for dependency in dependencies.reversed() {
            if let producer = dependency as? any ProducesResult<Input>, let output = producer.output {
                input = output
                return output
            }
        }
        return .failure(OperationError(.missingInput, operation: label))
    }

    override var upstreamFailure: (any Error)? {
        if case .failure(let error)? = input { return error }
        return nil
    }
}

/// Turns its input into its output with a closure (the adapter operations of OperationQueue code).
///
/// ```swift
/// let decode = TransformOperation { (data: Data) in try JSONDecoder().decode(Page.self, from: data) }
/// ```
public final class TransformOperation<Input: Sendable, Output: Sendable>: ConsumingOperation<Input, Output>, @unchecked Sendable {
    // @unchecked Sendable: `transform` is immutable and Sendable.
    private let transform: @Sendable (Input) throws -> Output

    /// An operation that runs `transform` on its input.
    public init(_ transform: @escaping @Sendable (Input) throws -> Output) {
        self.transform = transform
        super.init()
    }

    public override func execute(input: Input) {
        finish(with: Result { try transform(input) })
    }

    override var finishesWhileStarting: Bool { true }
}
