import Catena
package import Logging

/// Collects log messages in memory.
package final class CapturedLogs: Sendable {
    private let lines = Locked<[(level: Logger.Level, text: String)]>([])
    package func append(_ level: Logger.Level, _ text: String) { lines.withLock { $0.append((level, text)) } }
    package var all: [(level: Logger.Level, text: String)] { lines.withLock { $0 } }
    package var text: String { all.map(\.text).joined(separator: "\n") }

    package func logger(level: Logger.Level) -> Logger {
        var logger = Logger(label: "test") { _ in CaptureHandler(sink: self) }
        logger.logLevel = level
        return logger
    }

    package struct CaptureHandler: LogHandler {
        let sink: CapturedLogs
        package var metadata: Logger.Metadata = [:]
        package var logLevel: Logger.Level = .trace
        package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        package func log(event: LogEvent) {
            let extra = event.metadata.map { " " + $0.map { "\($0)=\($1)" }.sorted().joined(separator: " ") } ?? ""
            sink.append(event.level, "\(event.message)\(extra)")
        }
    }
}
