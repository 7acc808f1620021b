public import Foundation

/// An endpoint whose body goes to a file; its content is that file's URL.
public protocol DownloadEndpoint: Endpoint where Content == URL {
    /// Where the body is written (replaced if it exists).
    var destination: URL { get }
}

extension DownloadEndpoint {
    public func content(from response: APIResponse, context: EndpointContext) throws -> URL { destination }
}

/// A transfer in progress: its progress as an AsyncSequence and as a Foundation
/// `Progress` (whose `cancel()` cancels the transfer), and its outcome.
public final class Transfer<Content: Sendable>: Sendable {
    /// Every progress report, ending when the transfer ends.
    public let progress: AsyncStream<TransferProgress>
    /// The same progress for Foundation code; cancelling it cancels the transfer.
    public let foundationProgress: Progress
    private let task: Task<Result<Content, CatenaError>, Never>

    init(progress: AsyncStream<TransferProgress>, foundationProgress: Progress, task: Task<Result<Content, CatenaError>, Never>) {
        self.progress = progress
        self.foundationProgress = foundationProgress
        self.task = task
    }

    /// Waits for the outcome.
    public func value() async throws(CatenaError) -> Content {
        try await task.value.get()
    }

    /// Cancels the transfer; ``value()`` then throws `cancelled`.
    public func cancel() {
        task.cancel()
    }
}

extension Client {
    /// Starts downloading `endpoint`'s body to its destination, without holding it in
    /// memory on transports that stream (AsyncHTTPClient); see ``DownloadDestination``.
    public func download<E: DownloadEndpoint>(_ endpoint: E) -> Transfer<URL> {
        transfer(endpoint) { request, report in
            request[option: DownloadDestination.self] = DownloadDestination(file: endpoint.destination, progress: report)
        }
    }

    /// Starts sending `endpoint`, reporting how much of its body has gone out. Use a
    /// ``APIRequest/Body/file(_:contentType:)`` or ``APIRequest/Body/stream(length:contentType:open:)``
    /// body to send without holding it in memory (AsyncHTTPClient); see ``UploadProgress``.
    public func upload<E: Endpoint>(_ endpoint: E) -> Transfer<E.Content> {
        transfer(endpoint) { request, report in
            request[option: UploadProgress.self] = report
        }
    }

    /// Runs `endpoint` in a task whose progress feeds an AsyncStream and a Foundation
    /// Progress; `attach` puts the progress callback on the request.
    private func transfer<E: Endpoint>(
        _ endpoint: E, attach: @escaping @Sendable (inout APIRequest, @escaping @Sendable (TransferProgress) -> Void) -> Void
    ) -> Transfer<E.Content> {
        transfer { report throws(CatenaError) in try await perform(endpoint) { attach(&$0, report) }.content }
    }

    /// Runs `operation` in a task whose progress feeds an AsyncStream and a Foundation
    /// Progress.
    func transfer<Content: Sendable>(
        _ operation: @escaping @Sendable (_ report: @escaping @Sendable (TransferProgress) -> Void) async throws(CatenaError) -> Content
    ) -> Transfer<Content> {
        let (stream, continuation) = AsyncStream.makeStream(of: TransferProgress.self, bufferingPolicy: .bufferingNewest(256))
        let progress = Progress(totalUnitCount: -1)
        let report: @Sendable (TransferProgress) -> Void = { update in
            continuation.yield(update)
            if let total = update.total { progress.totalUnitCount = total }
            progress.completedUnitCount = update.completed
        }
        let task = Task { () async -> Result<Content, CatenaError> in
            defer { continuation.finish() }
            do throws(CatenaError) {
                return .success(try await operation(report))
            } catch {
                return .failure(error)
            }
        }
        progress.cancellationHandler = { task.cancel() }
        return Transfer(progress: stream, foundationProgress: progress, task: task)
    }
}
