import Catena
import CatenaAsyncHTTPClient
import CatenaOperations
import Foundation
import ReqresAPI

/// Adds one to its predecessor's result.
final class Increment: ConsumingOperation<Int, Int>, @unchecked Sendable {
    // @unchecked Sendable: no state of its own.
    override func execute(input: Int) { finish(withResult: input + 1) }
}

/// Starts a chain with 0.
final class Zero: ResultOperation<Int>, @unchecked Sendable {
    // @unchecked Sendable: no state of its own.
    override func execute() { finish(withResult: 0) }
}

/// Values written by plain operations, each step reading its predecessor's slot.
final class Slots: @unchecked Sendable {
    // @unchecked Sendable: slot i is written by operation i only, and read by operation
    // i + 1 only after operation i finished (the dependency orders them).
    var values: [Int]
    init(count: Int) { values = Array(repeating: 0, count: count) }
}

/// (a) a Catena chain of `count` operations passing results: `TransformOperation`s,
/// or with `subclass`, a `ConsumingOperation` subclass (which the chain cannot know to
/// be synchronous, so every step goes through the queue).
func catenaChain(_ count: Int, subclass: Bool = false) async throws -> (Int, build: Duration) {
    let start = ContinuousClock.now
    let value: Int
    if subclass {
        var chain = Zero().passesResult(to: Increment())
        for _ in 2..<count { chain = chain.passesResult(to: Increment()) }
        let build = ContinuousClock.now - start
        value = try await chain.value(on: OperationQueue())
        return (value, build)
    }
    let increment = { TransformOperation { (value: Int) in value + 1 } }
    var chain = Zero().passesResult(to: increment())
    for _ in 2..<count { chain = chain.passesResult(to: increment()) }
    let build = ContinuousClock.now - start
    value = try await chain.value(on: OperationQueue())
    return (value, build)
}

/// (b) plain OperationQueue: `count` BlockOperations wired with addDependency, all
/// added at once.
func plainQueueChain(_ count: Int) async -> Int {
    let slots = Slots(count: count)
    let queue = OperationQueue()
    var operations: [Operation] = []
    operations.reserveCapacity(count)
    for index in 0..<count {
        let operation = BlockOperation { slots.values[index] = index == 0 ? 0 : slots.values[index - 1] + 1 }
        if let previous = operations.last { operation.addDependency(previous) }
        operations.append(operation)
    }
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        operations.last!.completionBlock = { continuation.resume() }
        addAll(operations, to: queue)
    }
    return slots.values[count - 1]
}

private func addAll(_ operations: [Operation], to queue: OperationQueue) {
    queue.addOperations(operations, waitUntilFinished: false)
}

/// (c) an async/await loop with one dispatch hop per step: to the global concurrent
/// queue, or, with `serial`, to a serial queue of its own.
func asyncLoop(_ count: Int, serial: DispatchQueue? = nil) async -> Int {
    let queue = serial ?? DispatchQueue.global()
    var value = 0
    for _ in 1..<count {
        let current = value
        value = await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: current + 1) }
        }
    }
    return value
}

/// The operations section: a 10,000-step chain three ways, and the users
/// chain with each engine against the demo server.
func operationChains(base: URL, rounds: Int) async throws {
    let count = 10_000
    let serial = DispatchQueue(label: "bench.serial")
    var catena: [Double] = [], builds: [Double] = [], loop: [Double] = [], serialLoop: [Double] = [], subclassed: [Double] = []
    _ = try await catenaChain(count)
    _ = await asyncLoop(count)
    for _ in 0..<rounds {
        var start = ContinuousClock.now
        let (sum, build) = try await catenaChain(count)
        catena.append((ContinuousClock.now - start).milliseconds)
        builds.append(build.milliseconds)
        start = ContinuousClock.now
        let loopSum = await asyncLoop(count)
        loop.append((ContinuousClock.now - start).milliseconds)
        start = ContinuousClock.now
        let serialSum = await asyncLoop(count, serial: serial)
        serialLoop.append((ContinuousClock.now - start).milliseconds)
        start = ContinuousClock.now
        let (subclassSum, _) = try await catenaChain(count, subclass: true)
        subclassed.append((ContinuousClock.now - start).milliseconds)
        guard sum == count - 1, loopSum == count - 1, serialSum == count - 1, subclassSum == count - 1 else { throw BenchmarkError.status(sum) }
    }
    var plain: [Double] = []
    for size in [1_000, count] {
        let start = ContinuousClock.now
        let sum = await plainQueueChain(size)
        guard sum == size - 1 else { throw BenchmarkError.status(sum) }
        plain.append((ContinuousClock.now - start).milliseconds)
    }
    let a = median(catena)
    let versusLoop = zip(catena, loop).map { $0 / $1 }
    let versusSerial = zip(catena, serialLoop).map { $0 / $1 }
    func range(_ values: [Double]) -> String { "\(format(values.min()!, 1))–\(format(values.max()!, 1))" }
    print(
        "| chain of \(count) operations, each adding 1 to its predecessor's result (\(rounds) interleaved rounds) | ms, median | Catena (a) / this, per round |"
    )
    print("|---|---:|---:|")
    print("| (a) Catena chain of `TransformOperation`s (`passesResult`), building included | \(format(a, 1)) (building \(format(median(builds), 1))) | |")
    print(
        "| (a') the same with a `ConsumingOperation` subclass: every step through the queue | \(format(median(subclassed), 1)) | \(format(median(zip(catena, subclassed).map { $0 / $1 }), 2)) × |"
    )
    print(
        "| (b) plain OperationQueue, `addDependency`, all added at once (one run) | \(format(plain[1], 0)) | **(b) is \(format(plain[1] / a, 0)) × slower** |")
    print("| (b) the same with 1,000 operations (one run) | \(format(plain[0], 1)) | |")
    print(
        "| (c) async/await loop, one hop per step to the global dispatch queue | \(format(median(loop), 1)) | **\(format(median(versusLoop), 2)) ×** (\(range(versusLoop))) |"
    )
    print(
        "| (c') the same, hopping to a serial dispatch queue | \(format(median(serialLoop), 1)) | \(format(median(versusSerial), 2)) × (\(range(versusSerial))) |"
    )

    // The users chain: list, decode, user, decode.
    let chain = EnvironmentMiddleware(ServerEnvironment(baseURL: base)!) --> AsyncHTTPClientTransport()
    let client = Client(chain)
    func asyncEngine() async throws {
        let list = try await client.send(ListUsersEndpoint(page: 1))
        _ = try await client.send(UserEndpoint(id: list.data[0].id))
    }
    func operationsEngine() async throws {
        let operations = EndpointOperation(client: client, endpoint: ListUsersEndpoint(page: 1))
            .passesResult(to: EndpointOperation(client: client) { (list: UserPage) in UserEndpoint(id: list.data[0].id) })
        _ = try await operations.value()
    }
    var asyncTimes: [Duration] = [], operationTimes: [Duration] = []
    for round in 0..<(1_000 + 50) {
        var start = ContinuousClock.now
        try await asyncEngine()
        let asyncTime = ContinuousClock.now - start
        start = ContinuousClock.now
        try await operationsEngine()
        let operationTime = ContinuousClock.now - start
        if round >= 50 {  // warm-up
            asyncTimes.append(asyncTime)
            operationTimes.append(operationTime)
        }
    }
    asyncTimes.sort()
    operationTimes.sort()
    let ratio = percentile(operationTimes, 0.5).milliseconds / percentile(asyncTimes, 0.5).milliseconds
    print()
    print("| the users chain (list, then user), AsyncHTTPClient, 1,000 interleaved runs | p50 ms | p99 ms | vs. async |")
    print("|---|---:|---:|---:|")
    print(
        "| async engine (`Client.send` twice) | \(format(percentile(asyncTimes, 0.5).milliseconds, 3)) | \(format(percentile(asyncTimes, 0.99).milliseconds, 3)) | 1 × |"
    )
    print(
        "| operations engine (two `EndpointOperation`s, `passesResult`) | \(format(percentile(operationTimes, 0.5).milliseconds, 3)) | \(format(percentile(operationTimes, 0.99).milliseconds, 3)) | **\(format(ratio, 2)) ×** |"
    )
    print()
}
