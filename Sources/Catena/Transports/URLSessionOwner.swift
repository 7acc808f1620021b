import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Thrown when a request's total timeout passed before its response was complete.
struct TotalTimeoutReached: Error {}

/// Owns a session with Catena's delegate and invalidates it when the last transport
/// that uses it goes (never for the shared one).
final class URLSessionOwner: Sendable {
    let session: URLSession
    let router: URLSessionRouter
    private let shared: Bool

    static let shared = URLSessionOwner(configuration: URLSessionTransport.defaultConfiguration, shared: true)

    init(configuration: URLSessionConfiguration, shared: Bool) {
        let router = URLSessionRouter()
        self.router = router
        self.shared = shared
        self.session = URLSession(configuration: configuration, delegate: router, delegateQueue: nil)
    }

    deinit {
        if !shared { session.finishTasksAndInvalidate() }
    }
}
