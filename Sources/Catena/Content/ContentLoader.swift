public import Observation

/// Keeps fetched content in memory and publishes where loading it stands (Apexy's
/// ApexyLoader, on Swift concurrency): for a screen that shows the content, a spinner
/// while it loads, and an error with the old content when a refresh fails.
///
/// ```swift
/// let loader = ContentLoader(client: client, endpoint: UserEndpoint(id: 2))
/// let token = loader.observe { state in render(state) }   // keep the token
/// loader.startLoading()
/// ```
///
/// Observe it in any of three ways; each sees every state change, in order, once:
/// ``observe(_:)`` (a closure, removed when its token is dropped), ``states`` (an
/// `AsyncSequence`), or Observation (`@Observable`: SwiftUI, `withObservationTracking`).
///
/// It lives on the main actor. Dropping it cancels the load in flight; no callback
/// runs after that.
@MainActor
@Observable
public final class ContentLoader<Content: Sendable> {
    /// Where loading stands.
    public private(set) var state: LoadingState<Content> = .initial

    @ObservationIgnored private let load: @Sendable (_ current: Content?) async throws -> Content
    @ObservationIgnored private let hasMore: @Sendable (Content) -> Bool
    @ObservationIgnored private let running = RunningLoad()
    @ObservationIgnored private let audience = Audience<Content>()

    /// A loader that runs `load` for each load. `load` is given the content loaded so
    /// far (nil for the first load and for a refresh) and returns the new content;
    /// `hasMore` says whether ``startLoading()`` has anything left to load once there is
    /// content (for a plain resource: always).
    public init(
        load: @escaping @Sendable (_ current: Content?) async throws -> Content,
        hasMore: @escaping @Sendable (Content) -> Bool = { _ in true }
    ) {
        self.load = load
        self.hasMore = hasMore
    }

    /// A loader for `endpoint`'s content, sent through `client`.
    public convenience init<E: Endpoint>(client: Client, endpoint: E) where E.Content == Content {
        self.init(load: { _ in try await client.send(endpoint) })
    }

    deinit {
        running.cancel()
        audience.finish()
    }

    /// Starts a load (with the cached content, if any, kept visible). Does nothing and
    /// returns false when a load is already running, or when there is nothing more to
    /// load (a paged loader on its last page).
    @discardableResult
    public func startLoading() -> Bool {
        if let content = state.content, !hasMore(content) { return false }
        return begin(from: state.content)
    }

    /// Loads afresh, from nothing (a paged loader: from the first page), keeping the
    /// cached content visible meanwhile. Returns false when a load is already running.
    @discardableResult
    public func refresh() -> Bool {
        begin(from: nil)
    }

    /// Cancels the load in flight, if any; the state goes back to what it was before
    /// (the content, or initial).
    public func cancel() {
        guard state.isLoading, running.cancel() else { return }
        set(state.content.map { .success(content: $0) } ?? .initial)
    }

    /// Calls `handler` with every state change, in order, on the main actor, until the
    /// returned token is dropped or cancelled. Keep the token.
    public func observe(_ handler: @escaping @MainActor @Sendable (LoadingState<Content>) -> Void) -> ObservationToken {
        audience.add(handler)
    }

    /// Every state from now on, starting with the current one. The sequence ends when
    /// the loader goes away or the consuming task is cancelled.
    public var states: AsyncStream<LoadingState<Content>> {
        audience.stream(startingWith: state)
    }

    private func begin(from current: Content?) -> Bool {
        guard !state.isLoading else { return false }
        set(.loading(cache: state.content))
        let load = load
        running.start { [weak self] in
            let result: Result<Content, CatenaError>
            do {
                result = .success(try await load(current))
            } catch {
                result = .failure(CatenaError.wrapping(error, request: .placeholder, detail: "the content loader's load failed"))
            }
            return { @MainActor in self?.finish(result) }
        }
        return true
    }

    private func finish(_ result: Result<Content, CatenaError>) {
        guard state.isLoading else { return }
        switch result {
        case .success(let content): set(.success(content: content))
        case .failure(let error) where error.code == .cancelled: set(state.content.map { .success(content: $0) } ?? .initial)
        case .failure(let error): set(.failure(error: error, cache: state.content))
        }
    }

    private func set(_ new: LoadingState<Content>) {
        state = new
        audience.deliver(new)
    }
}
