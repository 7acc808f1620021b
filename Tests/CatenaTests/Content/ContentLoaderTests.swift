import Catena
import Foundation
import Observation
import Testing

/// A load the test finishes by hand.
final class Gate<Value: Sendable>: Sendable {
    private let waiting = Locked<[CheckedContinuation<Result<Value, any Error>, Never>]>([])
    private let calls = Locked<[Int?]>([])

    /// The load: waits until the test opens the gate.
    func load(_ current: Int?) async throws -> Value {
        calls.withLock { $0.append(current) }
        let result = await withCheckedContinuation { continuation in
            waiting.withLock { $0.append(continuation) }
        }
        return try result.get()
    }

    var started: Int { calls.withLock { $0.count } }
    var currents: [Int?] { calls.withLock { $0 } }

    /// Finishes the oldest load waiting.
    func open(_ result: Result<Value, any Error>) async {
        while waiting.withLock({ $0.isEmpty }) { await Task.yield() }
        waiting.withLock { $0.removeFirst() }.resume(returning: result)
    }
}

/// Waits on the main actor until `condition` holds (five seconds at most).
@MainActor
func settle(_ condition: @MainActor () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + .seconds(5)
    while !condition(), ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(2)) }
    return condition()
}

private struct Boom: Error {}

@Suite("Loading state")
struct LoadingStateTests {
    typealias State = LoadingState<Int>
    static let error = CatenaError(.unacceptableStatus, request: try! APIRequest(urlString: "https://example.com/a"))
    static let other = CatenaError(.timedOut, request: try! APIRequest(urlString: "https://example.com/b"))

    @Test("content, isLoading and error of each state")
    func accessors() {
        #expect(State.initial.content == nil && !State.initial.isLoading)
        #expect(State.loading(cache: 3).content == 3 && State.loading(cache: nil).isLoading)
        #expect(State.success(content: 4).content == 4 && State.success(content: 4).error == nil)
        #expect(State.failure(error: Self.error, cache: 5).content == 5)
        #expect(State.failure(error: Self.error, cache: nil).error?.code == .unacceptableStatus)
    }

    @Test("merge: both must succeed; loading wins over success; the first failure is reported")
    func merge() {
        let add: (Int, Int) -> Int = (+)
        func describe(_ state: LoadingState<Int>) -> String {
            switch state {
            case .initial: "initial"
            case .loading(let cache): "loading \(cache.map(String.init) ?? "-")"
            case .success(let content): "success \(content)"
            case .failure(let error, let cache): "failure \(error.code.rawValue) \(cache.map(String.init) ?? "-")"
            }
        }
        #expect(describe(State.success(content: 1).merge(State.success(content: 2), add)) == "success 3")
        #expect(describe(State.success(content: 1).merge(State.loading(cache: 2), add)) == "loading 3")
        #expect(describe(State.loading(cache: nil).merge(State.success(content: 2), add)) == "loading -")
        #expect(describe(State.success(content: 1).merge(State.initial, add)) == "initial")
        #expect(describe(State.loading(cache: 1).merge(State.initial, add)) == "loading -")
        #expect(
            describe(State.failure(error: Self.error, cache: 1).merge(State.failure(error: Self.other, cache: 2), add))
                == "failure \(Self.error.code.rawValue) 3")
        #expect(describe(State.success(content: 1).merge(State.failure(error: Self.other, cache: nil), add)) == "failure \(Self.other.code.rawValue) -")
        #expect(describe(State.loading(cache: 1).merge(State.failure(error: Self.other, cache: 2), add)) == "failure \(Self.other.code.rawValue) 3")
    }
}

@Suite("Content loader")
@MainActor
struct ContentLoaderTests {
    @Test("every transition: initial → loading → success → loading (cached) → failure (cached) → loading → success")
    func transitions() async {
        let gate = Gate<Int>()
        let loader = ContentLoader<Int>(load: { try await gate.load($0) })
        var seen: [String] = []
        let token = loader.observe { seen.append(String($0.description.prefix { $0 != ":" })) }
        #expect(loader.state.description == "initial")

        #expect(loader.startLoading())
        #expect(loader.state.isLoading && loader.state.content == nil)
        await gate.open(.success(1))
        #expect(await settle { loader.state.content == 1 && !loader.state.isLoading })

        #expect(loader.refresh())
        #expect(loader.state.description == "loading (showing cached content)")
        #expect(loader.state.content == 1, "refresh keeps the cached content visible")
        await gate.open(.failure(Boom()))
        #expect(await settle { loader.state.error != nil })
        #expect(loader.state.content == 1, "a failure keeps the cached content")

        #expect(loader.startLoading())
        await gate.open(.success(2))
        #expect(await settle { loader.state.content == 2 && !loader.state.isLoading })
        #expect(
            seen == [
                "loading", "success", "loading (showing cached content)",
                "failure (showing cached content)", "loading (showing cached content)", "success",
            ])
        #expect(gate.currents == [nil, nil, 1], "refresh loads from nothing; startLoading from the content it has")
        _ = token
    }

    @Test("startLoading while a load runs does nothing and says so")
    func startWhileLoading() async {
        let gate = Gate<Int>()
        let loader = ContentLoader<Int>(load: { try await gate.load($0) })
        #expect(loader.startLoading())
        #expect(!loader.startLoading())
        #expect(!loader.refresh())
        await gate.open(.success(1))
        #expect(await settle { loader.state.content == 1 })
        #expect(gate.started == 1)
    }

    @Test("cancel stops the load and goes back to the state before it")
    func cancel() async {
        let gate = Gate<Int>()
        let loader = ContentLoader<Int>(load: { try await gate.load($0) })
        loader.startLoading()
        loader.cancel()
        #expect(loader.state.description == "initial")
        await gate.open(.success(1))
        try? await Task.sleep(for: .milliseconds(20))
        #expect(loader.state.description == "initial", "the cancelled load's result is dropped")
    }

    @Test("observers: closures and streams see every change, in order, exactly once; a dropped token stops its closure")
    func observers() async {
        let gate = Gate<Int>()
        let loader = ContentLoader<Int>(load: { try await gate.load($0) })
        var first: [String] = [], second: [String] = []
        let firstToken = loader.observe { first.append($0.description) }
        var secondToken: ObservationToken? = loader.observe { second.append($0.description) }
        let stream = loader.states
        let collected = Task { @MainActor in
            var states: [String] = []
            for await state in stream {
                states.append(state.description)
                if states.count == 5 { break }
            }
            return states
        }
        loader.startLoading()
        await gate.open(.success(1))
        #expect(await settle { loader.state.content == 1 })
        secondToken = nil
        loader.refresh()
        await gate.open(.success(2))
        #expect(await settle { loader.state.content == 2 && !loader.state.isLoading })
        #expect(first == ["loading", "success", "loading (showing cached content)", "success"])
        #expect(second == ["loading", "success"], "removed when its token was dropped")
        #expect(await collected.value == ["initial", "loading", "success", "loading (showing cached content)", "success"])
        _ = (firstToken, secondToken)
    }

    @Test("an observer that starts a load from its callback: every observer still sees the states in order (issue 11, defect 6)")
    func nestedDelivery() async {
        let gate = Gate<Int>()
        let loader = ContentLoader<Int>(load: { try await gate.load($0) })
        var first: [String] = [], second: [String] = []
        var refreshed = false
        let firstToken = loader.observe { state in
            first.append(state.description)
            if state.content == 1, !state.isLoading, !refreshed {
                refreshed = true
                loader.refresh()
            }
        }
        let secondToken = loader.observe { second.append($0.description) }
        let stream = loader.states
        let collected = Task { @MainActor in
            var states: [String] = []
            for await state in stream {
                states.append(state.description)
                if states.count == 5 { break }
            }
            return states
        }
        loader.startLoading()
        await gate.open(.success(1))
        await gate.open(.success(2))
        #expect(await settle { loader.state.content == 2 && !loader.state.isLoading })
        let expected = ["loading", "success", "loading (showing cached content)", "success"]
        #expect(first == expected)
        #expect(second == expected)
        #expect(await collected.value == ["initial"] + expected)
        _ = (firstToken, secondToken)
    }

    @Test("Observation sees state changes")
    func observation() async {
        let gate = Gate<Int>()
        let loader = ContentLoader<Int>(load: { try await gate.load($0) })
        let changed = Locked(0)
        withObservationTracking {
            _ = loader.state
        } onChange: {
            changed.withLock { $0 += 1 }
        }
        loader.startLoading()
        #expect(changed.withLock { $0 } == 1)
        await gate.open(.success(1))
        #expect(await settle { loader.state.content == 1 })
    }

    @Test("dropping the loader cancels its load; no callback runs after")
    func cancelOnDeinit() async {
        let gate = Gate<Int>()
        let cancelled = Locked(false)
        var loader: ContentLoader<Int>? = ContentLoader<Int>(load: { current in
            try await withTaskCancellationHandler {
                try await gate.load(current)
            } onCancel: {
                cancelled.withLock { $0 = true }
            }
        })
        var calls = 0
        let token = loader?.observe { _ in calls += 1 }
        weak let weakLoader = loader
        loader?.startLoading()
        #expect(calls == 1)
        loader = nil
        #expect(weakLoader == nil)
        #expect(await settle { cancelled.withLock { $0 } }, "the load in flight was cancelled")
        await gate.open(.success(1))
        try? await Task.sleep(for: .milliseconds(20))
        #expect(calls == 1, "no callback after the loader went away")
        _ = token
    }

    @Test("a paged loader appends pages and knows when there is no next page")
    func paging() async {
        struct Page: PagedContent {
            let items: [Int]
            let pageNumber: Int
            let pageCount: Int
        }
        let loader = ContentLoader<Pages<Page>>(
            load: { current in
                let number = (current?.loadedPages ?? 0) + 1
                let pages = current ?? Pages(items: [], loadedPages: 0, pageCount: 3)
                return pages.appending(Page(items: [number * 10, number * 10 + 1], pageNumber: number, pageCount: 3))
            },
            hasMore: { $0.hasNextPage }
        )
        for expected in 1...3 {
            #expect(loader.startLoading())
            #expect(await settle { loader.state.content?.loadedPages == expected && !loader.state.isLoading })
        }
        #expect(loader.state.content?.items == [10, 11, 20, 21, 30, 31])
        #expect(!loader.startLoading(), "no next page after the last")
        #expect(loader.refresh())
        #expect(await settle { loader.state.content?.loadedPages == 1 && !loader.state.isLoading })
        #expect(loader.state.content?.items == [10, 11])
    }
}
