@testable import Catena
import Foundation
import Testing

/// A loader that answers at once: the tightest interleaving of enter and leave.
private struct Instant: HTTPLoader {
    func load(_ request: APIRequest) async throws(CatenaError) -> APIResponse {
        // One suspension, so the holder leaves while others are between deciding
        // and queueing.
        await Task.yield()
        return APIResponse(status: .ok, request: request)
    }
}

@Suite("ThrottleMiddleware under contention")
struct ThrottleStressTests {
    @Test("16 tasks × 5,000 loads through a limit of 1 all finish, and a free slot never sits beside a waiter")
    func noLostWakeUp() async throws {
        let throttle = ThrottleMiddleware(maxInFlight: 1)
        let chain = throttle --> Instant()
        let request = try APIRequest(.get, urlString: "http://127.0.0.1/x")
        let finished = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await withTaskGroup(of: Void.self) { workers in
                    for _ in 0..<16 {
                        workers.addTask {
                            for _ in 0..<5_000 { _ = try? await chain.load(request) }
                        }
                    }
                }
                return true
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(60))
                return false
            }
            let first = await group.next() ?? false
            // A stall leaves waiters queued forever: free them so the test ends.
            if !first { await throttle.reset() }
            group.cancelAll()
            return first
        }
        #expect(finished, "a load waited for a slot that was free (lost wake-up)")
        #expect(throttle.waiting == 0)
        #expect(throttle.invariantHolds)
    }

    @Test("a slot freed between the first look and joining the queue is taken, not lost")
    func slotFreedInTheGap() async throws {
        let holder = Catena.Locked<Catena.Gate?>(nil)
        let gate = Catena.Gate(
            limit: 1,
            beforeQueueing: {
                let gate: Catena.Gate? = holder.withLock { value in value }
                gate?.leave()
            })
        holder.withLock { value in value = gate }
        #expect(await gate.enter())  // takes the only slot (fast path: no hook)
        let entered = await withTaskGroup(of: Bool?.self) { group in
            group.addTask { await gate.enter() }  // no slot; the hook frees it in the gap
            group.addTask {
                try? await Task.sleep(for: .seconds(10))
                return nil
            }
            let first = await group.next() ?? nil
            if first == nil { gate.failAll() }
            group.cancelAll()
            return first
        }
        #expect(entered == true, "the freed slot went to nobody and the waiter stalled")
        #expect(gate.invariantHolds)
    }

    @Test("cancelled and reset waiters never keep a slot: after a storm of cancels the throttle still serves")
    func cancelsAndResets() async throws {
        let throttle = ThrottleMiddleware(maxInFlight: 2)
        let chain = throttle --> Instant()
        let request = try APIRequest(.get, urlString: "http://127.0.0.1/x")
        for round in 0..<20 {
            await withTaskGroup(of: Void.self) { group in
                for index in 0..<64 {
                    let task = Task { _ = try? await chain.load(request) }
                    group.addTask {
                        if index % 3 == 0 { task.cancel() }
                        _ = await task.result
                    }
                }
                if round % 5 == 0 { await throttle.reset() }
            }
            #expect(throttle.invariantHolds)
        }
        #expect(throttle.waiting == 0)
        #expect(try await chain.load(request).status == .ok)
    }
}
