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

// MARK: Paged content

/// A page of a paged list: its items, its number (from 1), and how many pages there are.
public protocol PagedContent: Sendable {
    associatedtype Item: Sendable
    /// The items on this page.
    var items: [Item] { get }
    /// This page's number, from 1.
    var pageNumber: Int { get }
    /// How many pages the list has.
    var pageCount: Int { get }
}

/// The pages of a paged list loaded so far.
public struct Pages<Page: PagedContent>: Sendable {
    /// Every item of the loaded pages, in order.
    public var items: [Page.Item]
    /// How many pages are loaded.
    public var loadedPages: Int
    /// How many pages the list has, as the last page said.
    public var pageCount: Int

    /// Pages loaded so far; `Pages()` is none yet.
    public init(items: [Page.Item] = [], loadedPages: Int = 0, pageCount: Int = 1) {
        self.items = items
        self.loadedPages = loadedPages
        self.pageCount = pageCount
    }

    /// Whether a next page exists.
    public var hasNextPage: Bool { loadedPages < pageCount }

    /// `page` added to these pages.
    public func appending(_ page: Page) -> Pages {
        Pages(items: items + page.items, loadedPages: loadedPages + 1, pageCount: page.pageCount)
    }
}

extension ContentLoader {
    /// A loader that appends page after page: ``startLoading()`` loads the next page
    /// (and returns false after the last), ``refresh()`` starts again from page 1.
    /// `endpoint` makes the endpoint for a page number, from 1.
    public convenience init<E: Endpoint>(
        client: Client,
        pages endpoint: @escaping @Sendable (_ page: Int) -> E
    ) where E.Content: PagedContent, Content == Pages<E.Content> {
        self.init(
            load: { current in
                let pages = current ?? Pages()
                return pages.appending(try await client.send(endpoint(pages.loadedPages + 1)))
            },
            hasMore: { $0.hasNextPage }
        )
    }
}

// MARK: Observers

/// Stops an observation when cancelled or dropped.
public final class ObservationToken: Sendable {
    private let stop: Locked<(@Sendable () -> Void)?>

    init(_ stop: @escaping @Sendable () -> Void) {
        self.stop = Locked(stop)
    }

    /// Stops the observation now.
    public func cancel() {
        stop.withLock { stop in
            defer { stop = nil }
            return stop
        }?()
    }

    deinit {
        cancel()
    }
}

/// A loader's observers: closures and stream continuations, in the order they came.
final class Audience<Content: Sendable>: Sendable {
    typealias Handler = @MainActor @Sendable (LoadingState<Content>) -> Void

    private struct Members {
        var next: UInt64 = 0
        var handlers: [(id: UInt64, handler: Handler)] = []
        var streams: [UInt64: AsyncStream<LoadingState<Content>>.Continuation] = [:]
        /// States waiting for the delivery in progress to end: an observer that starts
        /// a load from its callback sets a new state while the others have not yet
        /// seen the one before.
        var pending: [LoadingState<Content>] = []
        var delivering = false
    }

    private let members = Locked(Members())

    func add(_ handler: @escaping Handler) -> ObservationToken {
        let id = members.withLock { members in
            members.next += 1
            members.handlers.append((members.next, handler))
            return members.next
        }
        return ObservationToken { [weak self] in
            self?.members.withLock { $0.handlers.removeAll { $0.id == id } }
        }
    }

    func stream(startingWith current: LoadingState<Content>) -> AsyncStream<LoadingState<Content>> {
        let (stream, continuation) = AsyncStream<LoadingState<Content>>.makeStream()
        continuation.yield(current)
        let id = members.withLock { members in
            members.next += 1
            members.streams[members.next] = continuation
            return members.next
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.members.withLock { $0.streams.removeValue(forKey: id) }
        }
        return stream
    }

    /// Hands `state` to every observer, after every state handed over before it; a
    /// closure removed meanwhile is skipped. Called from inside an observer, it queues
    /// the state for the delivery in progress to hand on once it is done.
    @MainActor
    func deliver(_ state: LoadingState<Content>) {
        let first = members.withLock { members -> Bool in
            members.pending.append(state)
            defer { members.delivering = true }
            return !members.delivering
        }
        guard first else { return }
        while let next = members.withLock({ members -> LoadingState<Content>? in
            if members.pending.isEmpty {
                members.delivering = false
                return nil
            }
            return members.pending.removeFirst()
        }) {
            deliverNow(next)
        }
    }

    @MainActor
    private func deliverNow(_ state: LoadingState<Content>) {
        let (ids, streams) = members.withLock { ($0.handlers.map(\.id), Array($0.streams.values)) }
        for continuation in streams { continuation.yield(state) }
        for id in ids {
            guard let handler = members.withLock({ $0.handlers.first { $0.id == id }?.handler }) else { continue }
            handler(state)
        }
    }

    func finish() {
        let streams = members.withLock { members in
            defer { members = Members() }
            return Array(members.streams.values)
        }
        for continuation in streams { continuation.finish() }
    }
}

/// The load in flight, cancellable from anywhere (a loader's deinit included).
final class RunningLoad: Sendable {
    private let task = Locked<Task<Void, Never>?>(nil)

    /// Runs `work` off the main actor, then the main-actor continuation it returns.
    @MainActor
    func start(_ work: @escaping @Sendable () async -> @MainActor @Sendable () -> Void) {
        let running = Task { @MainActor in
            let then = await work()
            guard !Task.isCancelled else { return }
            then()
        }
        task.withLock { $0 = running }
    }

    /// Cancels the load; false if none ran.
    @discardableResult
    func cancel() -> Bool {
        guard
            let running = task.withLock({ task in
                defer { task = nil }
                return task
            })
        else { return false }
        running.cancel()
        return true
    }
}
