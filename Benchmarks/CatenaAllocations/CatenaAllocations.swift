// Allocations per call, raw transport against Catena, counted rather than timed: a
// figure the noise of a shared two-core machine cannot move.
//
//   swift build -c release --enable-all-traits --product CatenaAllocations
//   .build/release/CatenaAllocations [--calls 2000] [--in-flight 1] [--only TEXT] [--in-process] [--loops N]
//
// It counts with ordo-one/malloc-interposer (package-benchmark's counter), preloaded:
// the program starts itself again with LD_PRELOAD set when it is not. The demo server
// runs in a process of its own (this program with --serve), so only the client's
// allocations are counted: every thread of this process, event loops included. A
// program of its own, because an interposed malloc would slow every timed benchmark.
import AsyncHTTPClient
import BenchmarkBaselines
import Catena
import CatenaAsyncHTTPClient
import CatenaDemoServer
import CatenaOpenAPI
import DemoUsersOpenAPI
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Logging
import MallocInterposerSwift
import NIOCore
import NIOFoundationCompat
import NIOPosix
import OpenAPIAsyncHTTPClient

/// One way of making one call.
struct Variant: Sendable {
    let group: String
    let name: String
    /// What one call does: counts are per unit (a call, or an event of a stream).
    var units = 1
    /// Calls per round: `nil` for the command's `--calls`.
    var calls: Int?
    let call: @Sendable () async throws -> Void

    init(group: String, name: String, units: Int = 1, calls: Int? = nil, call: @escaping @Sendable () async throws -> Void) {
        self.group = group
        self.name = name
        self.units = units
        self.calls = calls
        self.call = call
    }
}

/// What one variant allocated per call.
struct Count {
    var allocations: Double
    var bytes: Double
    /// This process's CPU time (user + system) per unit, in µs, in rounds without counting:
    /// the server's is not in it, as it runs in a process of its own.
    var cpu: Double
    /// Calls (units) per second in those rounds.
    var rate: Double
}

/// User + system CPU time of this process so far, in µs.
func processCPU() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    func micros(_ time: timeval) -> Double { Double(time.tv_sec) * 1e6 + Double(time.tv_usec) }
    return micros(usage.ru_utime) + micros(usage.ru_stime)
}

@main
enum CatenaAllocations {
    static func main() async throws {
        let arguments = CommandLine.arguments
        if arguments.contains("--serve") {
            try await ServerProcess.serve({ try await DemoServer.start(logLevel: .error) }, url: \.baseURL)
        }
        let calls = arguments.firstIndex(of: "--calls").flatMap { arguments.indices.contains($0 + 1) ? Int(arguments[$0 + 1]) : nil } ?? 2000
        // `--in-flight N`: N calls at a time instead of one after another.
        let inFlight = arguments.firstIndex(of: "--in-flight").flatMap { arguments.indices.contains($0 + 1) ? Int(arguments[$0 + 1]) : nil } ?? 1

        // `--loops N`: the client's own group of N event loops. With one, a delegate's task
        // and its connection always share the loop (AsyncHTTPClient's delegate API hops
        // every callback to the task's loop when they differ).
        var loops: Int?
        if let flag = arguments.firstIndex(of: "--loops") {
            guard arguments.indices.contains(flag + 1), let count = Int(arguments[flag + 1]), count >= 1 else {
                print("--loops needs a whole number of event loops, at least 1")
                exit(2)
            }
            loops = count
        }

        // Counting needs the interposer preloaded: start again with it when it is not.
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        let interposer = executable.deletingLastPathComponent().appendingPathComponent("libMallocInterposerSwift.so").path
        if ProcessInfo.processInfo.environment["LD_PRELOAD"]?.contains("MallocInterposer") != true {
            guard FileManager.default.fileExists(atPath: interposer) else {
                print("no \(interposer): build with swift build -c release --enable-all-traits --product CatenaAllocations")
                exit(2)
            }
            setenv("LD_PRELOAD", interposer, 1)
            let argv = arguments.map { strdup($0) } + [nil]
            execv(executable.path, argv)
            print("could not start again with LD_PRELOAD: errno \(errno)")
            exit(2)
        }

        // The server, in a process of its own and without the interposer; with
        // `--in-process`, in this one, as CatenaBenchmarks runs it (its allocations are
        // then counted too: for a profiler's run, not for the allocation figures).
        let base: URL
        var serverProcess: ServerProcess?
        var inProcessServer: RunningDemoServer?
        if arguments.contains("--in-process") {
            inProcessServer = try await DemoServer.start(logLevel: .error)
            base = inProcessServer!.baseURL
        } else {
            var environment = ProcessInfo.processInfo.environment
            environment["LD_PRELOAD"] = nil
            let process = try ServerProcess(environment: environment)
            base = process.baseURL
            serverProcess = process
        }
        let userURL = base.appendingPathComponent("api/users/2")

        let loopGroup = loops.map { MultiThreadedEventLoopGroup(numberOfThreads: $0) } ?? MultiThreadedEventLoopGroup.singleton
        let client = HTTPClient(eventLoopGroup: loopGroup, configuration: CatenaAsyncHTTPClient.AsyncHTTPClientTransport.defaultConfiguration)
        let ahc = CatenaAsyncHTTPClient.AsyncHTTPClientTransport(client: client)
        let quiet = Logger(label: "allocations") { _ in SwiftLogNoOpLogHandler() }
        let environmentOption = ServerEnvironment(baseURL: base)!
        let ahcChain = EnvironmentMiddleware(environmentOption) --> LogMiddleware(logger: quiet) --> ahc
        let absolute = APIRequest(.get, url: userURL)
        let relative = try APIRequest(.get, path: ["api", "users", "2"])
        let watched = {
            var request = absolute
            request[option: UploadProgress.self] = { _ in }
            return request
        }()
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.httpShouldSetCookies = false
        let session = URLSession(configuration: configuration)
        let gatheringSession = GatheringSession(configuration: configuration)
        let urlSession = URLSessionTransport(configuration: configuration)
        let urlSessionChain = EnvironmentMiddleware(environmentOption) --> LogMiddleware(logger: quiet) --> urlSession

        // Server-sent events: a stream of 1,000 small events per call, counted per event.
        let events = 1000
        let eventQuery = [URLQueryItem(name: "count", value: String(events)), URLQueryItem(name: "interval", value: "0")]
        let eventURL = base.appending(path: "api/events").appending(queryItems: eventQuery)
        let eventRequest = APIRequest(.get, url: eventURL)
        let eventCalls = max(calls / 100, 10)
        @Sendable func expect(_ count: Int) throws {
            guard count == events else { throw CatenaError(.invalidResponse, request: eventRequest, detail: "\(count) of \(events) events") }
        }

        // A large streamed body, counted per MiB: what each body part costs.
        let mebibytes = 64
        let fileURL = base.appending(path: "api/file").appending(queryItems: [URLQueryItem(name: "size", value: String(mebibytes << 20))])
        let fileRequest = APIRequest(.get, url: fileURL)
        let fileCalls = max(calls / 250, 4)
        let fileGroup = "streamed \(mebibytes) MiB, per MiB, AsyncHTTPClient"
        @Sendable func expectFile(_ count: Int) throws {
            guard count == mebibytes << 20 else { throw CatenaError(.invalidResponse, request: fileRequest, detail: "\(count) of \(mebibytes << 20) bytes") }
        }

        // OpenAPI: one generated client over the official transport and over Catena's bridge.
        let official = DemoUsersOpenAPI.Client(
            serverURL: base, transport: OpenAPIAsyncHTTPClient.AsyncHTTPClientTransport(configuration: .init(client: client)))
        let bridged = DemoUsersOpenAPI.Client(serverURL: base, transport: CatenaClientTransport(ahc))

        let variants: [Variant] = [
            Variant(group: "buffered GET, AsyncHTTPClient", name: "raw: execute + collect") {
                let response = try await client.execute(HTTPClientRequest(url: userURL.absoluteString), timeout: .seconds(30))
                _ = try await response.body.collect(upTo: 1 << 20)
            },
            Variant(group: "buffered GET, AsyncHTTPClient", name: "raw: delegate API (ResponseAccumulator), the API Catena's path is built on") {
                let outgoing = try HTTPClient.Request(url: userURL.absoluteString)
                _ = try await client.execute(request: outgoing, delegate: ResponseAccumulator(request: outgoing), deadline: .now() + .seconds(30))
                    .futureResult.get()
            },
            Variant(group: "buffered GET, AsyncHTTPClient", name: "Catena transport (delegate path)") {
                _ = try await ahc.load(absolute)
            },
            Variant(group: "buffered GET, AsyncHTTPClient", name: "Catena chain (environment + log)") {
                _ = try await ahcChain.load(relative)
            },
            Variant(group: "buffered GET, AsyncHTTPClient", name: "Catena transport, execute + collect path") {
                _ = try await ahc.load(watched)
            },
            Variant(group: "streamed GET, AsyncHTTPClient", name: "raw: execute, body read chunk by chunk") {
                let response = try await client.execute(HTTPClientRequest(url: userURL.absoluteString), timeout: .seconds(30))
                for try await _ in response.body {}
            },
            Variant(group: "streamed GET, AsyncHTTPClient", name: "Catena transport: stream, body read chunk by chunk") {
                for try await _ in try await ahc.stream(absolute).body {}
            },
            Variant(group: fileGroup, name: "raw: execute, body read chunk by chunk", units: mebibytes, calls: fileCalls) {
                let response = try await client.execute(HTTPClientRequest(url: fileURL.absoluteString), timeout: .seconds(60))
                var count = 0
                for try await chunk in response.body { count += chunk.readableBytes }
                try expectFile(count)
            },
            Variant(group: fileGroup, name: "raw: delegate API, parts counted on the event loop (no reader, no window)", units: mebibytes, calls: fileCalls) {
                let outgoing = try HTTPClient.Request(url: fileURL.absoluteString)
                try expectFile(try await client.execute(request: outgoing, delegate: CountingDelegate()).futureResult.get())
            },
            Variant(group: fileGroup, name: "Catena transport: stream, body read chunk by chunk", units: mebibytes, calls: fileCalls) {
                var count = 0
                for try await chunk in try await ahc.stream(fileRequest).body { count += chunk.count }
                try expectFile(count)
            },
            Variant(group: fileGroup, name: "Catena transport: stream, 256 KiB window (the old default)", units: mebibytes, calls: fileCalls) {
                var request = fileRequest
                request[option: StreamWindow.self] = 256 * 1024
                var count = 0
                for try await chunk in try await ahc.stream(request).body { count += chunk.count }
                try expectFile(count)
            },
            Variant(
                group: "server-sent event, AsyncHTTPClient", name: "raw: execute + Catena's event parser on each chunk (as Data, not copied)", units: events,
                calls: eventCalls
            ) {
                let response = try await client.execute(HTTPClientRequest(url: eventURL.absoluteString), timeout: .seconds(30))
                var parser = ServerSentEventParser()
                var count = 0
                for try await chunk in response.body {
                    let (decoded, error) = parser.read(Data(buffer: chunk, byteTransferStrategy: .noCopy), request: eventRequest)
                    if let error { throw error }
                    count += decoded.count
                }
                try expect(count)
            },
            Variant(group: "server-sent event, AsyncHTTPClient", name: "Catena transport: stream(…).serverSentEvents()", units: events, calls: eventCalls) {
                var count = 0
                for try await _ in try await ahc.stream(eventRequest).serverSentEvents() { count += 1 }
                try expect(count)
            },
            Variant(group: "OpenAPI getUser, AsyncHTTPClient", name: "raw: the official OpenAPIAsyncHTTPClient transport") {
                guard try await official.getUser(path: .init(id: 2)).ok.body.json.data.id == 2 else { throw CatenaError(.invalidResponse, request: absolute) }
            },
            Variant(group: "OpenAPI getUser, AsyncHTTPClient", name: "CatenaClientTransport over AsyncHTTPClientTransport") {
                guard try await bridged.getUser(path: .init(id: 2)).ok.body.json.data.id == 2 else { throw CatenaError(.invalidResponse, request: absolute) }
            },
            Variant(group: "buffered GET, URLSession", name: "raw: data(for:)") {
                _ = try await session.data(for: URLRequest(url: userURL))
            },
            Variant(group: "buffered GET, URLSession", name: "raw: session delegate gathering the body (corelibs' delegate path, no Catena)") {
                _ = try await gatheringSession.data(for: URLRequest(url: userURL))
            },
            Variant(group: "buffered GET, URLSession", name: "Catena transport") {
                _ = try await urlSession.load(absolute)
            },
            Variant(group: "buffered GET, URLSession", name: "Catena chain (environment + log)") {
                _ = try await urlSessionChain.load(relative)
            },
        ]

        print("Allocations per call: \(calls) sequential calls of GET /api/users/2 per round (\(eventCalls) streams of \(events) events), median of 5 rounds;")
        let placement = inProcessServer == nil ? "in another process" : "in this process (counted too)"
        let calling = inFlight > 1 ? "a task per call, \(inFlight) in flight" : "one call after another"
        let clientLoops = loops.map { "its own \($0) event loop(s)" } ?? "the shared event loops"
        print("the demo server \(placement); counted with ordo-one/malloc-interposer (LD_PRELOAD); \(calling); the client on \(clientLoops).")
        print("date: \(Date().formatted(.iso8601))")
        print()
        print(
            "| workload | variant | allocations per call | bytes allocated per call | allocations / raw | client CPU µs per call | CPU / raw | calls/s | rate / raw |"
        )
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
        var raw: Count?
        var group = ""
        // `--only TEXT`: the variants whose "group: name" contains it (for a profiler's run).
        let only = arguments.firstIndex(of: "--only").flatMap { arguments.indices.contains($0 + 1) ? arguments[$0 + 1] : nil }
        for variant in variants where only.map({ "\(variant.group): \(variant.name)".contains($0) }) ?? true {
            let counted = try await count(variant, calls: variant.calls ?? calls, inFlight: inFlight)
            if variant.group != group {
                group = variant.group
                raw = counted
            }
            let isRaw = variant.name.hasPrefix("raw")
            let ratio = raw.map { String(format: "%.2f ×", counted.allocations / $0.allocations) } ?? ""
            let cpuRatio = raw.map { String(format: "%.2f ×", counted.cpu / $0.cpu) } ?? ""
            let rateRatio = raw.map { String(format: "%.2f ×", counted.rate / $0.rate) } ?? ""
            print(
                "| \(variant.group) | \(variant.name) | \(String(format: "%.1f", counted.allocations)) | \(String(format: "%.0f", counted.bytes)) | \(isRaw ? "" : ratio) | \(String(format: "%.1f", counted.cpu)) | \(isRaw ? "" : cpuRatio) | \(String(format: "%.0f", counted.rate)) | \(isRaw ? "" : rateRatio) |"
            )
        }
        try await client.shutdown()
        if loops != nil { try await loopGroup.shutdownGracefully() }
        session.invalidateAndCancel()
        gatheringSession.session.invalidateAndCancel()
        serverProcess?.stop()
        await inProcessServer?.stop()
    }
}

/// The median over `rounds` rounds of `calls` calls each, counted between hook and unhook.
func count(_ variant: Variant, calls: Int, inFlight: Int = 1, rounds: Int = 5) async throws -> Count {
    /// `calls` calls, `inFlight` at a time.
    func run(_ calls: Int) async throws {
        guard inFlight > 1 else {
            for _ in 0..<calls { try await variant.call() }
            return
        }
        // A task per call, `inFlight` at a time, as CatenaBenchmarks and a server that
        // makes a call per request of its own run them: each task's allocator starts
        // from its first slab, so deep or wide async frames show as allocations.
        try await withThrowingTaskGroup(of: Void.self) { group in
            var started = 0
            while started < min(inFlight, calls) {
                group.addTask { try await variant.call() }
                started += 1
            }
            while try await group.next() != nil, started < calls {
                group.addTask { try await variant.call() }
                started += 1
            }
            try await group.waitForAll()
        }
    }
    try await run(min(200, calls))
    var allocations: [Double] = [], bytes: [Double] = [], cpu: [Double] = [], rate: [Double] = []
    for _ in 0..<rounds {
        let before = processCPU()
        let started = ContinuousClock.now
        try await run(calls)
        let wall = ContinuousClock.now - started
        cpu.append((processCPU() - before) / Double(calls * variant.units))
        rate.append(Double(calls * variant.units) / (Double(wall.components.seconds) + Double(wall.components.attoseconds) / 1e18))
        MallocInterposerSwift.reset()
        MallocInterposerSwift.hook()
        try await run(calls)
        MallocInterposerSwift.unhook()
        let statistics = MallocInterposerSwift.getStatistics()
        allocations.append(Double(statistics.mallocCount) / Double(calls * variant.units))
        bytes.append(Double(statistics.mallocBytesCount) / Double(calls * variant.units))
    }
    let middle = rounds / 2
    return Count(
        allocations: allocations.sorted()[middle], bytes: bytes.sorted()[middle], cpu: cpu.sorted()[middle], rate: rate.sorted()[middle])
}

/// AsyncHTTPClient's delegate API with nothing on top: counts each part's bytes where it
/// arrives and asks for the next at once. What that API itself costs per part, the floor
/// under Catena's streamed path, which is built on it.
final class CountingDelegate: HTTPClientResponseDelegate, Sendable {
    typealias Response = Int
    private let bytes = Locked(0)

    func didReceiveBodyPart(task: HTTPClient.Task<Int>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        bytes.withLock { $0 += buffer.readableBytes }
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didFinishRequest(task: HTTPClient.Task<Int>) throws -> Int {
        bytes.withLock { $0 }
    }
}
