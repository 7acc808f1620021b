#if !Observability
// The package's Observability trait brings swift-distributed-tracing and swift-metrics;
// without it this module holds only placeholders that name the trait.

/// Unavailable: enable the package's `Observability` trait.
@available(*, unavailable, message: "Enable the Observability trait of the Catena package to use TracingMiddleware: .package(url: …, from: …, traits: [\"Observability\"])")
public enum TracingMiddleware {}

/// Unavailable: enable the package's `Observability` trait.
@available(*, unavailable, message: "Enable the Observability trait of the Catena package to use MetricsMiddleware: .package(url: …, from: …, traits: [\"Observability\"])")
public enum MetricsMiddleware {}
#endif
