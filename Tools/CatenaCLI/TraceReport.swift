import Catena
import CatenaObservability
import Foundation
import InMemoryTracing
import MetricsTestKit
import Tracing

/// `--trace`: an in-memory tracer and metrics backend for one demo run, printed at
/// the end as a span tree and a metrics table.
struct TraceReport {
    let tracer = InMemoryTracer()
    let metrics = TestMetrics()

    /// `chain` with tracing and metrics in front, both recording here.
    func instrument(_ chain: any HTTPLoader) -> any HTTPLoader {
        TracingMiddleware(tracer: tracer) --> MetricsMiddleware(factory: metrics) --> chain
    }

    /// Runs `body` inside a root span named `name`, so the calls nest under it.
    func run<Result>(_ name: String, _ body: () async throws -> Result) async throws -> Result {
        try await withTracer(tracer) {
            try await withSpan(name) { _ in try await body() }
        }
    }

    /// Where the report goes: standard output for the demos, standard error for
    /// `catena request`, whose standard output is the body.
    enum Destination { case standardOutput, standardError }

    func print(to destination: Destination = .standardOutput) {
        let spans = tracer.finishedSpans.sorted { $0.startInstant.nanosecondsSinceEpoch < $1.startInstant.nanosecondsSinceEpoch }
        let ids = Set(spans.map(\.spanID))
        emit("", destination)
        emit("Spans (in-memory tracer; each call one client span, what happened inside as events)", destination)
        for root in spans where root.parentSpanID.map({ !ids.contains($0) }) ?? true {
            printSpan(root, in: spans, prefix: "", childPrefix: "", destination)
        }
        emit("", destination)
        emit("Metrics (in-memory backend)", destination)
        var rows: [(String, String, String)] = []
        for timer in metrics.timers.sorted(by: { $0.label + "\($0.dimensions)" < $1.label + "\($1.dimensions)" }) {
            let values = timer.values
            let mean = values.isEmpty ? 0 : values.reduce(0, +) / Int64(values.count)
            rows.append((timer.label, Self.dimensions(timer.dimensions), "\(values.count) calls, mean \(Terminal.milliseconds(.nanoseconds(mean)))"))
        }
        for counter in metrics.counters.sorted(by: { $0.label + "\($0.dimensions)" < $1.label + "\($1.dimensions)" }) {
            rows.append((counter.label, Self.dimensions(counter.dimensions), "\(counter.totalValue)"))
        }
        for meter in metrics.meters {
            rows.append((meter.label, Self.dimensions(meter.dimensions), "now \(Int(meter.lastValue ?? 0)), peak \(Int(meter.values.max() ?? 0))"))
        }
        let labelWidth = rows.map(\.0.count).max() ?? 0, dimensionWidth = rows.map(\.1.count).max() ?? 0
        for row in rows { emit("  \(row.0.padding(labelWidth))  \(row.1.padding(dimensionWidth))  \(row.2)", destination) }
    }

    private func printSpan(
        _ span: FinishedInMemorySpan, in spans: [FinishedInMemorySpan], prefix: String, childPrefix: String, _ destination: Destination
    ) {
        let nanoseconds = span.endInstant.nanosecondsSinceEpoch - span.startInstant.nanosecondsSinceEpoch
        var line = "\(prefix)\(span.operationName)"
        for name in ["http.response.status_code", "url.full"] {
            if let value = span.attributes.get(name) { line += " \(Self.text(value))" }
        }
        if let error = span.attributes.get("error.type") { line += " error.type=\(Self.text(error))" }
        emit("  \(line)  \(Terminal.milliseconds(.nanoseconds(Int64(nanoseconds))))", destination)
        let children = spans.filter { $0.parentSpanID == span.spanID }
        for event in span.events {
            let attributes = Self.attributes(event.attributes)
            emit("  \(childPrefix)\(children.isEmpty ? "  " : "│ ")· \(event.name)\(attributes.isEmpty ? "" : " \(attributes)")", destination)
        }
        for (index, child) in children.enumerated() {
            let last = index == children.count - 1
            printSpan(child, in: spans, prefix: childPrefix + (last ? "└─ " : "├─ "), childPrefix: childPrefix + (last ? "   " : "│  "), destination)
        }
    }

    private func emit(_ line: String, _ destination: Destination) {
        switch destination {
        case .standardOutput: Swift.print(line)
        case .standardError: StandardError.write(line + "\n")
        }
    }

    private static func attributes(_ attributes: SpanAttributes) -> String {
        var pairs: [String] = []
        attributes.forEach { name, value in pairs.append("\(name)=\(text(value))") }
        return pairs.sorted().joined(separator: " ")
    }

    private static func text(_ value: SpanAttribute) -> String {
        switch value {
        case .string(let text): text
        case .int64(let number): "\(number)"
        case .int32(let number): "\(number)"
        case .double(let number): "\(number)"
        case .bool(let flag): "\(flag)"
        default: "\(value)"
        }
    }

    private static func dimensions(_ dimensions: [(String, String)]) -> String {
        dimensions.map { "\($0.0)=\($0.1)" }.joined(separator: " ")
    }
}
