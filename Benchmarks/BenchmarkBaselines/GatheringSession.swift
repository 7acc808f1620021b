// Baselines the benchmark programs share (CatenaBenchmarks times them, CatenaAllocations
// counts them): what a transport costs by itself, apart from anything Catena does.
import Catena
public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// The smallest delegate-driven use of URLSession: a session delegate that gathers each
/// data task's body and answers its caller on completion. The baseline for what corelibs'
/// delegate callbacks cost next to `data(for:)`, apart from anything Catena does.
public struct GatheringSession: Sendable {
    private final class Delegate: NSObject, URLSessionDataDelegate, Sendable {
        struct Pending {
            var continuation: CheckedContinuation<(Data, Int), any Error>
            var body = Data()
        }

        let pending = Locked<[Int: Pending]>([:])

        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
            pending.withLock { $0[dataTask.taskIdentifier]?.body.append(data) }
        }

        func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
            guard let done = pending.withLock({ $0.removeValue(forKey: task.taskIdentifier) }) else { return }
            if let error {
                done.continuation.resume(throwing: error)
            } else {
                done.continuation.resume(returning: (done.body, (task.response as? HTTPURLResponse)?.statusCode ?? -1))
            }
        }
    }

    private let delegate = Delegate()
    /// The session, for invalidating it when done.
    public let session: URLSession

    /// A session with this configuration and the gathering delegate.
    public init(configuration: URLSessionConfiguration) {
        session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
    }

    /// The body and status of `request`.
    public func data(for request: URLRequest) async throws -> (Data, Int) {
        try await withCheckedThrowingContinuation { continuation in
            let task = session.dataTask(with: request)
            delegate.pending.withLock { $0[task.taskIdentifier] = Delegate.Pending(continuation: continuation) }
            task.resume()
        }
    }
}
