/// Forces a request onto the ``Composite`` route with this name.
public enum CompositeRoute: RequestOption {
    public static let defaultValue: String? = nil
}

/// Sends each request down one of several sub-chains: the route its
/// ``CompositeRoute`` option names, else the first whose predicate matches, else the
/// fallback. ``reset()`` reaches every sub-chain.
///
/// ```swift
/// let chain = Composite([
///     .init(name: "internal", loader: BasicAuthMiddleware(hosts: ["intranet"], allowHTTP: true, credentials: c) --> transport) { $0.host == "intranet" },
///     .init(name: "api", loader: tokenAuth --> transport) { $0.host == "api.example.com" },
/// ], fallback: transport)
/// ```
public struct Composite: HTTPLoader {
    /// One sub-chain and when to use it.
    public struct Route: Sendable {
        public let name: String
        public let loader: any HTTPLoader
        public let matches: @Sendable (APIRequest) -> Bool

        public init(name: String, loader: any HTTPLoader, matches: @escaping @Sendable (APIRequest) -> Bool = { _ in false }) {
            self.name = name
            self.loader = loader
            self.matches = matches
        }
    }

    public let routes: [Route]
    public let fallback: any HTTPLoader

    public init(_ routes: [Route], fallback: any HTTPLoader) {
        self.routes = routes
        self.fallback = fallback
    }

    public func load(_ request: APIRequest) async throws(CatenaError) -> APIResponse {
        try await loader(for: request).load(request)
    }

    public func stream(_ request: APIRequest) async throws(CatenaError) -> StreamedResponse {
        try await loader(for: request).stream(request)
    }

    /// The route `request` names, else the first that matches, else the fallback.
    private func loader(for request: APIRequest) throws(CatenaError) -> any HTTPLoader {
        if let name = request[option: CompositeRoute.self] {
            guard let route = routes.first(where: { $0.name == name }) else {
                throw CatenaError(
                    .invalidRequest, request: request, detail: "no composite route named \"\(name)\" (routes: \(routes.map(\.name).joined(separator: ", ")))")
            }
            return route.loader
        }
        return routes.first { $0.matches(request) }?.loader ?? fallback
    }

    /// Resets every sub-chain and the fallback, concurrently.
    public func reset() async {
        await withTaskGroup(of: Void.self) { group in
            for loader in routes.map(\.loader) + [fallback] {
                group.addTask { await loader.reset() }
            }
        }
    }
}
