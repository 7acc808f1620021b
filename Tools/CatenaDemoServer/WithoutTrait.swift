#if !DemoServer
// Catena's demo server (Hummingbird) is built for Catena's own command, tests and article
// snippets, with the package's DemoServer trait; a dependent never needs it.

/// Unavailable: Catena's own demo server, built with the package's `DemoServer` trait.
@available(*, unavailable, message: "DemoServer needs the Catena package's DemoServer trait: traits: [\"DemoServer\"]")
public enum DemoServer {}
#endif
