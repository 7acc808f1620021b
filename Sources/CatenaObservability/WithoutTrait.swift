#if !Observability
// The package's Observability trait brings swift-distributed-tracing and swift-metrics;
// without it this module holds only placeholders that name the trait.

/// Unavailable: enable the package's `Observability` trait.
@available(*, unavailable, message: "TracingMiddleware needs the Catena package's Observability trait: traits: [\"Observability\"]")
public struct TracingMiddleware {
    /// Unavailable: enable the package's `Observability` trait.
    @available(*, unavailable, message: "TracingMiddleware needs the Catena package's Observability trait: traits: [\"Observability\"]")
    public init(tracer: Any? = nil, spanName: Any? = nil) {}
}

/// Unavailable: enable the package's `Observability` trait.
@available(*, unavailable, message: "MetricsMiddleware needs the Catena package's Observability trait: traits: [\"Observability\"]")
public struct MetricsMiddleware {
    /// Unavailable: enable the package's `Observability` trait.
    @available(*, unavailable, message: "MetricsMiddleware needs the Catena package's Observability trait: traits: [\"Observability\"]")
    public init(factory: Any? = nil, hosts: Any? = nil) {}
}
#endif
