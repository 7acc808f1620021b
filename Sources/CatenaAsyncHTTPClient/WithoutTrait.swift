#if !AsyncHTTPClient
// The package's AsyncHTTPClient trait brings AsyncHTTPClient and SwiftNIO; without it
// this module holds only a placeholder, so that a dependent that forgot the trait gets a
// message naming it instead of "cannot find type in scope".

/// Unavailable: enable the package's `AsyncHTTPClient` trait.
@available(*, unavailable, message: "Enable the AsyncHTTPClient trait of the Catena package to use AsyncHTTPClientTransport: .package(url: …, from: …, traits: [\"AsyncHTTPClient\"])")
public enum AsyncHTTPClientTransport {}
#endif
