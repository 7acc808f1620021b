/// Where loading some content stands (Apexy's loading state).
public enum LoadingState<Content: Sendable>: Sendable {
    /// Nothing loaded, nothing loading.
    case initial
    /// Loading; `cache` is the content loaded before, if any, to keep showing.
    case loading(cache: Content?)
    /// Loaded.
    case success(content: Content)
    /// The last load failed; `cache` is the content loaded before, if any.
    case failure(error: CatenaError, cache: Content?)

    /// The content to show: the loaded content, or the cached content while loading or
    /// after a failure.
    public var content: Content? {
        switch self {
        case .initial: nil
        case .loading(let cache): cache
        case .success(let content): content
        case .failure(_, let cache): cache
        }
    }

    /// Whether a load is running.
    public var isLoading: Bool {
        if case .loading = self { return true }
        return false
    }

    /// The error of a failed load.
    public var error: CatenaError? {
        if case .failure(let error, _) = self { return error }
        return nil
    }

    /// The same state with its content transformed.
    public func map<Other: Sendable>(_ transform: (Content) -> Other) -> LoadingState<Other> {
        switch self {
        case .initial: .initial
        case .loading(let cache): .loading(cache: cache.map(transform))
        case .success(let content): .success(content: transform(content))
        case .failure(let error, let cache): .failure(error: error, cache: cache.map(transform))
        }
    }

    /// One state for two loads, as a screen that shows both needs it:
    ///
    /// - a failure wins, the first one (this state's) if both failed;
    /// - then loading, if either still loads;
    /// - then initial, if either has not started;
    /// - success only when both succeeded.
    ///
    /// Content (and cached content) is merged with `transform` when both sides have some.
    public func merge<Other: Sendable, Merged: Sendable>(
        _ other: LoadingState<Other>,
        _ transform: (Content, Other) -> Merged
    ) -> LoadingState<Merged> {
        var both: Merged? {
            guard let mine = content, let theirs = other.content else { return nil }
            return transform(mine, theirs)
        }
        switch (self, other) {
        case (.failure(let error, _), _), (_, .failure(let error, _)):
            return .failure(error: error, cache: both)
        case (.loading, _), (_, .loading):
            return .loading(cache: both)
        case (.initial, _), (_, .initial):
            return .initial
        case (.success(let mine), .success(let theirs)):
            return .success(content: transform(mine, theirs))
        }
    }
}

extension LoadingState: CustomStringConvertible {
    /// "initial", "loading (cached)", "success", "failure: <error>".
    public var description: String {
        switch self {
        case .initial: "initial"
        case .loading(let cache): cache == nil ? "loading" : "loading (showing cached content)"
        case .success: "success"
        case .failure(let error, let cache): "failure\(cache == nil ? "" : " (showing cached content)"): \(error)"
        }
    }
}
