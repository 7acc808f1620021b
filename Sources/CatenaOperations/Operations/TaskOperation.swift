public import Catena
public import Foundation

/// Runs an async closure as an operation: the bridge from async/await to
/// OperationQueue. Cancelling the operation cancels the task.
///
/// ```swift
/// let user = TaskOperation { (id: Int) in try await client.send(UserEndpoint(id: id)) }
/// ```
open class TaskOperation<Input: Sendable, Output: Sendable>: ConsumingOperation<Input, Output>, @unchecked Sendable {
    // @unchecked Sendable: `body` is immutable and Sendable; `task` is only touched with
    // the operation's `lock` held.
    private let body: @Sendable (Input) async throws -> Output
    private var task: Task<Void, Never>?

    /// An operation that runs `body` with its input.
    public init(_ body: @escaping @Sendable (Input) async throws -> Output) {
        self.body = body
        super.init()
    }

    /// An operation that runs `body`; it needs no input.
    public convenience init(_ body: @escaping @Sendable () async throws -> Output) where Input == Void {
        self.init { (_: Void) in try await body() }
        input = .success(())
    }

    public final override func execute(input: Input) {
        let body = body
        let running = Task { [self] in
            do {
                finish(withResult: try await body(input))
            } catch {
                finish(withError: error)
            }
        }
        lock.withLock { task = running }
        // Cancelled before the task was stored: `cancelled()` found nothing to cancel.
        if isCancelled { running.cancel() }
    }

    public final override func cancelled() {
        lock.withLock { task }?.cancel()
    }
}

/// Sends an endpoint through a `Client` and produces its content. Cancelling the
/// operation cancels the request in flight.
///
/// ```swift
/// let chain = EndpointOperation(client: client, endpoint: ListUsersEndpoint(page: 1))
///     .passesResult(to: EndpointOperation(client: client) { (list: UserList) in UserEndpoint(id: list.data[0].id) })
/// ```
public final class EndpointOperation<Input: Sendable, E: Endpoint>: TaskOperation<Input, E.Content>, @unchecked Sendable {
    // @unchecked Sendable: no state of its own beyond its superclass's.

    /// An operation that sends the endpoint `makeEndpoint` builds from its input.
    public init(client: Client, makeEndpoint: @escaping @Sendable (Input) throws -> E) {
        super.init { input in try await client.send(try makeEndpoint(input)) }
    }

    /// An operation that sends `endpoint`; it needs no input.
    public convenience init(client: Client, endpoint: E) where Input == Void {
        self.init(client: client, makeEndpoint: { _ in endpoint })
        input = .success(())
    }
}

/// Loads a request through a loader chain and produces the raw response (the
/// network operation of OperationQueue code); pair it with a ``TransformOperation`` that decodes.
/// Cancelling the operation cancels the request in flight.
public final class RequestOperation<Input: Sendable>: TaskOperation<Input, APIResponse>, @unchecked Sendable {
    // @unchecked Sendable: no state of its own beyond its superclass's.

    /// An operation that loads the request `makeRequest` builds from its input.
    public init(loader: any HTTPLoader, makeRequest: @escaping @Sendable (Input) throws -> APIRequest) {
        super.init { input in try await loader.load(try makeRequest(input)) }
    }

    /// An operation that loads `request`; it needs no input.
    public convenience init(loader: any HTTPLoader, request: APIRequest) where Input == Void {
        self.init(loader: loader, makeRequest: { _ in request })
        input = .success(())
    }
}

// MARK: Awaiting operations

extension ResultOperation {
    /// Adds the operation to `queue` and waits for its result. Cancelling the waiting
    /// task cancels the operation.
    public func value(on queue: OperationQueue = .catenaDefault) async throws -> Output {
        try await waitFor(self, cancel: { self.cancel() }, start: { queue.addOperation(self) }).get()
    }

    /// Waits for the result of an operation that something else runs. Cancelling the
    /// waiting task cancels the operation.
    public func result() async -> Result<Output, any Error> {
        await waitFor(self, cancel: { self.cancel() }, start: {})
    }
}

extension OperationChain where Last: ProducesResult {
    /// Starts the chain on `queue` (unless it already runs) and waits for its last
    /// operation's result. Cancelling the waiting task cancels the chain.
    public func value(on queue: OperationQueue = .catenaDefault) async throws -> Last.Output {
        try await waitFor(last, cancel: { cancel() }, start: { enqueue(on: queue) }).get()
    }
}

/// Runs `start`, then waits until `operation` finished; task cancellation calls `cancel`.
private func waitFor<Producer: ProducesResult>(
    _ operation: Producer,
    cancel: @escaping @Sendable () -> Void,
    start: () -> Void
) async -> Result<Producer.Output, any Error> {
    await withTaskCancellationHandler {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            operation.whenFinished { continuation.resume() }
            start()
        }
    } onCancel: {
        cancel()
    }
    return operation.output ?? .failure(OperationError(.noResult, operation: "\(Producer.self)"))
}
