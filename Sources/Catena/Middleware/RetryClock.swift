public import Foundation

/// The clock retry waits on. Inject a virtual one in tests so they do not sleep.
public protocol RetryClock: Sendable {
    /// The current time, for `Retry-After` dates.
    func now() -> Date
    /// Waits; throws when the calling task is cancelled.
    func sleep(for duration: Duration) async throws
}

/// The real clock.
public struct SystemRetryClock: RetryClock {
    public init() {}
    public func now() -> Date { Date() }
    public func sleep(for duration: Duration) async throws { try await Task.sleep(for: duration) }
}
