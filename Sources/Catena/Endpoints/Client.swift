public import Foundation
public import HTTPTypes

/// Sends endpoints through a loader chain: the one way in.
///
/// ```swift
/// let client = Client(EnvironmentMiddleware(env) --> RetryMiddleware() --> AsyncHTTPClientTransport())
/// let page = try await client.send(ListUsers(page: 1))
/// ```
///
/// Every failure is a ``CatenaError``: bad endpoint input is `invalidRequest` naming the
/// endpoint, a rejected response keeps its code (`unacceptableStatus`, `apiFailure`, …),
/// and content that does not decode is `decodingFailed`.
public struct Client: Sendable {
    /// The chain requests go through.
    public let loader: any HTTPLoader
    /// Passed to endpoints: the JSON decoder for those that bring none.
    public let context: EndpointContext

    /// A client over `loader`, decoding JSON with `decoder` unless an endpoint brings its own.
    public init(_ loader: any HTTPLoader, decoder: JSONDecoder = JSONDecoder()) {
        self.loader = loader
        self.context = EndpointContext(decoder: decoder)
    }

    /// Sends `endpoint` and returns its content.
    public func send<E: Endpoint>(_ endpoint: E) async throws(CatenaError) -> E.Content {
        try await sendWithMetadata(endpoint).content
    }

    /// The content of a call together with what the response said about it.
    public struct Sent<Content: Sendable>: Sendable {
        public let content: Content
        public let status: HTTPResponse.Status
        public let headerFields: HTTPFields
        /// From building the request to having the content.
        public let duration: Duration
    }

    /// Sends `endpoint` and returns its content, status, header fields and timing.
    public func sendWithMetadata<E: Endpoint>(_ endpoint: E) async throws(CatenaError) -> Sent<E.Content> {
        try await perform(endpoint) { _ in }
    }

    /// Builds the endpoint's request, lets `adjust` set options on it, loads, validates
    /// and produces the content.
    func perform<E: Endpoint>(_ endpoint: E, adjust: (inout APIRequest) -> Void) async throws(CatenaError) -> Sent<E.Content> {
        let start = ContinuousClock.now
        var request = try endpoint.buildRequest()
        adjust(&request)
        let response = try await loader.load(request)
        do {
            try endpoint.validate(response)
            let content = try endpoint.content(from: response, context: context)
            return Sent(content: content, status: response.status, headerFields: response.headerFields, duration: ContinuousClock.now - start)
        } catch let error as CatenaError {
            throw error
        } catch {
            throw CatenaError(
                .decodingFailed, request: response.request, response: response, underlyingError: error, detail: "\(E.self) could not read the response")
        }
    }

    /// Sends `endpoint` and calls `completion` exactly once: with the content, the
    /// error, or `cancelled` when the handle is cancelled first.
    @discardableResult
    public func send<E: Endpoint>(_ endpoint: E, completion: @escaping @Sendable (Result<E.Content, CatenaError>) -> Void) -> CallHandle {
        let task = Task {
            do throws(CatenaError) {
                completion(.success(try await send(endpoint)))
            } catch {
                completion(.failure(error))
            }
        }
        return CallHandle(task)
    }

    /// Sends `endpoint` and captures the outcome.
    public func result<E: Endpoint>(of endpoint: E) async -> Result<E.Content, CatenaError> {
        do throws(CatenaError) {
            return .success(try await send(endpoint))
        } catch {
            return .failure(error)
        }
    }
}

/// A call started with a completion handler; cancel it to stop the request.
public final class CallHandle: Sendable {
    private let task: Task<Void, Never>

    init(_ task: Task<Void, Never>) {
        self.task = task
    }

    /// Cancels the request; the completion handler then runs with `cancelled` (unless
    /// it already ran).
    public func cancel() { task.cancel() }

    /// Waits until the completion handler has run.
    public func wait() async { await task.value }
}

extension APIRequest {
    /// Stands in for a request that could not be built.
    static let placeholder = APIRequest(blank: .get)
}

// MARK: Fan-out

/// How a fan-out treats failures.
public enum FanOutPolicy: Sendable {
    /// Cancel the rest and throw the first error.
    case failFast
    /// Run everything; one `Result` per endpoint.
    case collect
}

/// How far a fan-out has come.
public struct FanOutProgress: Sendable, Equatable {
    public let completed: Int
    public let failed: Int
    public let total: Int

    /// Progress of `completed` of `total` calls, `failed` of them failed.
    public init(completed: Int, failed: Int, total: Int) {
        self.completed = completed
        self.failed = failed
        self.total = total
    }

    /// completed / total, 1 when there is nothing to do.
    public var fraction: Double { total == 0 ? 1 : Double(completed) / Double(total) }
}

extension Client {
    /// Sends every endpoint, at most `maxConcurrent` at a time, and returns one result
    /// per endpoint in input order.
    ///
    /// With ``FanOutPolicy/failFast`` the first failure cancels the calls in flight,
    /// starts no others and is thrown; with ``FanOutPolicy/collect`` every endpoint
    /// runs and failures are returned in place. Cancelling the calling task cancels the
    /// calls in flight and starts no new ones; then the fan-out throws `cancelled`.
    /// `onProgress` runs after each call completes, in completion order.
    public func sendAll<E: Endpoint>(
        _ endpoints: [E],
        maxConcurrent: Int = 8,
        policy: FanOutPolicy = .collect,
        onProgress: (@Sendable (FanOutProgress) -> Void)? = nil
    ) async throws(CatenaError) -> [Result<E.Content, CatenaError>] {
        let limit = max(1, maxConcurrent)
        var results = [Result<E.Content, CatenaError>?](repeating: nil, count: endpoints.count)
        var firstError: CatenaError?
        var completed = 0, failed = 0
        await withTaskGroup(of: (Int, Result<E.Content, CatenaError>).self) { group in
            var next = 0
            func startNext() -> Bool {
                guard next < endpoints.count, !Task.isCancelled, firstError == nil else { return false }
                let index = next
                let endpoint = endpoints[index]
                next += 1
                group.addTask { (index, await result(of: endpoint)) }
                return true
            }
            while next < limit, startNext() {}
            while let (index, result) = await group.next() {
                results[index] = result
                completed += 1
                if case .failure(let error) = result {
                    failed += 1
                    if policy == .failFast, firstError == nil {
                        firstError = error
                        group.cancelAll()
                    }
                }
                onProgress?(FanOutProgress(completed: completed, failed: failed, total: endpoints.count))
                _ = startNext()
            }
        }
        if let firstError { throw firstError }
        // Cancelled after every call had started: the calls ended as cancelled, and so
        // does the fan-out (not an array of cancellations).
        let cancelledCalls = Task.isCancelled && results.contains { if case .failure(let error)? = $0 { error.code == .cancelled } else { false } }
        guard completed == endpoints.count, !cancelledCalls else {
            throw CatenaError(.cancelled, request: .placeholder, detail: "the fan-out was cancelled after \(completed) of \(endpoints.count) calls")
        }
        return results.map { $0! }
    }

    /// ``sendAll(_:maxConcurrent:policy:onProgress:)`` with fail-fast, returning the
    /// contents in input order.
    public func sendAllOrFail<E: Endpoint>(
        _ endpoints: [E], maxConcurrent: Int = 8, onProgress: (@Sendable (FanOutProgress) -> Void)? = nil
    ) async throws(CatenaError) -> [E.Content] {
        let results = try await sendAll(endpoints, maxConcurrent: maxConcurrent, policy: .failFast, onProgress: onProgress)
        var contents: [E.Content] = []
        contents.reserveCapacity(results.count)
        for result in results { contents.append(try result.get()) }
        return contents
    }

    /// Starts a fan-out whose progress is an AsyncSequence: iterate `progress` while
    /// awaiting `results`. Cancelling the returned task cancels the fan-out.
    public func fanOut<E: Endpoint>(
        _ endpoints: [E], maxConcurrent: Int = 8, policy: FanOutPolicy = .collect
    ) -> (progress: AsyncStream<FanOutProgress>, results: Task<[Result<E.Content, CatenaError>], any Error>) {
        let (progress, continuation) = AsyncStream.makeStream(of: FanOutProgress.self, bufferingPolicy: .unbounded)
        let task = Task {
            defer { continuation.finish() }
            return try await sendAll(endpoints, maxConcurrent: maxConcurrent, policy: policy) { continuation.yield($0) }
        }
        return (progress, task)
    }
}
