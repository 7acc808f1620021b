import ArgumentParser
import Catena
import CatenaOperations
import CatenaDemoServer
import FlickrAPI
import Foundation
import Synchronization

/// A 1 + 100 fan-out, as in TWGOperations' Flickr example: one getRecent, then one getSizes per photo with bounded concurrency
/// and retries, then each photo's URL.
struct PhotosDemo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "photos",
        abstract: "A 1 + 100 fan-out: list recent photos, fetch every photo's sizes with bounded concurrency and retries, build the URLs.",
        discussion: """
            From TWGOperations' Flickr example: 1 list call, then one sizes call per photo, a \
            bounded number at a time, retried on transient failures, partial failures reported per photo. \
            On a terminal one progress bar updates in place; otherwise a line at every tenth.
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Option(help: "How many photos.")
    var count = 100

    @Option(help: "How many getSizes calls at once.")
    var concurrency = 8

    @Option(help: "The share of getSizes calls the embedded server fails with 503 (seeded, reproducible).")
    var failRate = 0.1

    @Option(help: "The embedded server's latency per call, in milliseconds.")
    var latencyMs = 20

    @Option(help: "Retries per call after the first attempt.")
    var retries = 2

    @Option(help: "async: Client.sendAll; operations: a GroupOperation of retrying endpoint operations.")
    var engine = Engine.async

    @Option(help: "The seed for the embedded server's failures.")
    var seed: UInt64 = 42

    func validate() throws {
        guard (1...500).contains(count) else { throw ValidationError("--count must be 1...500") }
        guard concurrency >= 1 else { throw ValidationError("--concurrency must be at least 1") }
        guard (0...1).contains(failRate) else { throw ValidationError("--fail-rate must be 0...1") }
        guard latencyMs >= 0, retries >= 0 else { throw ValidationError("--latency-ms and --retries must not be negative") }
    }

    func run() async throws {
        let attempts = AttemptCounter()
        let photos = PhotoSettings(latency: .milliseconds(latencyMs), failureRate: failRate, seed: seed, photoCount: max(count, 1000))
        await connection.runDemo(photos: photos, wrapping: { attempts --> $0 }) { chain, server in
            try await runDemo(chain, server: server, attempts: attempts)
        }
    }

    func runDemo(_ chain: any HTTPLoader, server: ServerDescription, attempts: AttemptCounter) async throws {
        print("A fan-out: getRecent, then \(count) × getSizes, \(concurrency) at a time, \(retries) retries each")
        print("server     \(server.url)\(server.embedded ? " (embedded: \(latencyMs) ms latency, \(Int(failRate * 100)) % failures, seed \(seed))" : "")")
        print()
        let start = ContinuousClock.now
        let (photos, results) =
            switch engine {
            case .async: try await fanOutAsync(chain)
            case .operations: try await fanOutOperations(chain)
            }
        let elapsed = ContinuousClock.now - start

        var urls: [String] = []
        var failures: [String] = []
        for (photo, result) in zip(photos, results) {
            switch result {
            case .success(let sizes): urls.append(sizes.largest?.source ?? photo.imageURL())
            case .failure(let error as CatenaError): failures.append("\(photo.id): \(error.code)\(error.response.map { " \($0.status.code)" } ?? "")")
            case .failure(let error): failures.append("\(photo.id): \(error)")
            }
        }
        let calls = photos.count + 1
        let latency = Duration.milliseconds(latencyMs)
        let ideal = latency * ((photos.count + concurrency - 1) / concurrency) + latency
        print()
        for url in urls.prefix(3) { print("  \(url)") }
        if urls.count > 3 { print("  … \(urls.count - 3) more") }
        for failure in failures.prefix(5) { print("  failed \(failure)") }
        print()
        print("photos           \(photos.count)")
        print("URLs built       \(urls.count)")
        print("failures         \(failures.count) after retries")
        print("retries spent    \(attempts.count - calls)")
        print("elapsed          \(Terminal.milliseconds(elapsed))")
        print("ideal            \(Terminal.milliseconds(ideal)) (ceil(\(photos.count)/\(concurrency)) × \(latencyMs) ms + \(latencyMs) ms, no failures)")
    }
}

extension PhotosDemo {
    /// getRecent, then `Client.sendAll` with `RetryMiddleware`.
    func fanOutAsync(_ chain: any HTTPLoader) async throws -> ([Photo], [Result<PhotoSizes, any Error>]) {
        let strategy = RetryStrategy(maxAttempts: retries + 1, baseDelay: .milliseconds(20), maxDelay: .milliseconds(200))
        let client = Client(RetryMiddleware(strategy) --> chain)
        let photos = try await client.send(GetRecentEndpoint(perPage: count)).photos.photo
        let bar = ProgressBar(total: photos.count)
        let results = try await client.sendAll(photos.map { GetSizesEndpoint(photoID: $0.id) }, maxConcurrent: concurrency) { progress in
            bar.update(progress)
        }
        bar.finish()
        return (photos, results.map { $0.mapError { $0 } })
    }

    /// TWGOperations' way: a getRecent operation, then a group that runs one retrying
    /// getSizes operation per photo on its own queue, `concurrency` at a time.
    func fanOutOperations(_ chain: any HTTPLoader) async throws -> ([Photo], [Result<PhotoSizes, any Error>]) {
        let client = Client(chain)
        let strategy = OperationRetryStrategy.backoff(
            maxAttempts: retries + 1,
            delay: .exponential(initial: .milliseconds(20), maximum: .milliseconds(200)),
            if: OperationRetryStrategy.transientHTTPFailure
        )
        let recent = RetryingOperation(strategy: strategy) { _ in EndpointOperation(client: client, endpoint: GetRecentEndpoint(perPage: count)) }
        let photos = try await recent.value().photos.photo
        let bar = ProgressBar(total: photos.count)
        let done = Locked((completed: 0, failed: 0))
        let sizes: [ResultOperation<PhotoSizes>] = photos.map { photo in
            let operation = RetryingOperation(strategy: strategy) { _ in EndpointOperation(client: client, endpoint: GetSizesEndpoint(photoID: photo.id)) }
            operation.addResultBlock { result in
                let progress = done.withLock { done in
                    done.completed += 1
                    if case .failure = result { done.failed += 1 }
                    return FanOutProgress(completed: done.completed, failed: done.failed, total: photos.count)
                }
                bar.update(progress)
            }
            return operation
        }
        let results = try await GroupOperation.collecting(sizes, maxConcurrent: concurrency).value()
        bar.finish()
        return (photos, results)
    }
}

/// Counts every attempt that reaches the transport (so retries show).
final class AttemptCounter: HTTPMiddleware {
    private let attempts = Atomic<Int>(0)
    var count: Int { attempts.load(ordering: .relaxed) }

    func load(_ request: APIRequest, next: some HTTPLoader) async throws(CatenaError) -> APIResponse {
        attempts.add(1, ordering: .relaxed)
        return try await next.load(request)
    }
}

/// A progress bar on a terminal; plain lines at every tenth otherwise.
final class ProgressBar: Sendable {
    private let total: Int
    private let isTerminal = isatty(STDOUT_FILENO) != 0
    private let lastTenth = Locked(-1)

    init(total: Int) { self.total = total }

    func update(_ progress: FanOutProgress) {
        if isTerminal {
            let width = 30
            let filled = Int(progress.fraction * Double(width))
            let line =
                "\r  [\(String(repeating: "#", count: filled))\(String(repeating: ".", count: width - filled))] \(progress.completed)/\(progress.total)  failed \(progress.failed)"
            FileHandle.standardOutput.write(Data(line.utf8))
        } else {
            let tenth = Int(progress.fraction * 10)
            let shouldPrint = lastTenth.withLock { last in
                guard tenth > last else { return false }
                last = tenth
                return true
            }
            if shouldPrint { print("  \(progress.completed)/\(progress.total) done, \(progress.failed) failed") }
        }
    }

    func finish() {
        if isTerminal { print() }
    }
}
