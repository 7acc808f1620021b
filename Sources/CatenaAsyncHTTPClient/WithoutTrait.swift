#if !AsyncHTTPClient
// The package's AsyncHTTPClient trait brings AsyncHTTPClient and SwiftNIO; without it
// this module holds only a placeholder, so that a dependent that forgot the trait gets a
// message naming it instead of "cannot find type in scope".

/// Unavailable: enable the package's `AsyncHTTPClient` trait.
@available(*, unavailable, message: "AsyncHTTPClientTransport needs the Catena package's AsyncHTTPClient trait: traits: [\"AsyncHTTPClient\"]")
public struct AsyncHTTPClientTransport {
    /// Unavailable: enable the package's `AsyncHTTPClient` trait.
    @available(*, unavailable, message: "AsyncHTTPClientTransport needs the Catena package's AsyncHTTPClient trait: traits: [\"AsyncHTTPClient\"]")
    public init(client: Any? = nil, configuration: Any? = nil, decodesCompression: Bool = false, timeout: Any? = nil) {}
}
#endif
