import Catena
import Foundation
import HTTPTypes
import Testing

/// `Redirects.follow` on its own, with a scripted `send`: which hops go out, which
/// answers are let go of (each followed or failed answer once, the returned one never),
/// and where each policy stops. The transports run the same loop against real servers
/// in the integration tests.
@Suite("The redirect loop: hops, limits and discarded answers")
struct RedirectLoopTests {
    /// An answer that knows which hop it answered, so discards can be counted.
    struct Answer {
        let response: APIResponse
        let hop: Int
    }

    /// What a script's `send` saw and let go of.
    struct Trace {
        var sent: [String] = []
        var discarded: [Int] = []
    }

    /// Runs `follow` for `request` against `script` (path → Location of a 302; a path
    /// missing from it answers 200).
    static func run(
        _ request: APIRequest, script: [String: String], timeout: Duration = .seconds(30), delay: Duration = .zero
    ) async -> (Result<Answer, CatenaError>, Trace) {
        var trace = Trace()
        let result: Result<Answer, CatenaError>
        do {
            result = .success(
                try await Redirects.follow(
                    request, defaultTimeout: timeout, head: { $0.response }, discard: { trace.discarded.append($0.hop) }
                ) { hop, _ throws(CatenaError) in
                    trace.sent.append((hop.host ?? "") + hop.percentEncodedPath)
                    if delay > .zero { try? await Task.sleep(for: delay) }
                    let location = script[hop.percentEncodedPath]
                    let response = APIResponse(
                        status: location == nil ? .ok : .found, headerFields: location.map { [.location: $0] } ?? [:], request: hop)
                    return Answer(response: response, hop: trace.sent.count)
                })
        } catch {
            result = .failure(error)
        }
        return (result, trace)
    }

    static let chain = ["/a": "/b", "/b": "/c", "/c": "/d"]

    static func request(_ policy: RedirectPolicy, path: String = "/a") throws -> APIRequest {
        var request = try APIRequest(.get, urlString: "http://api.example\(path)")
        request[option: RedirectPolicy.self] = policy
        return request
    }

    @Test("follow(max: 3) follows three redirects; every followed answer is let go of once, the last one kept")
    func followsToTheLimit() async throws {
        let (result, trace) = await Self.run(try Self.request(.follow(max: 3)), script: Self.chain)
        let answer = try result.get()
        #expect(answer.response.status == .ok)
        #expect(answer.response.request.percentEncodedPath == "/d")
        #expect(trace.sent == ["api.example/a", "api.example/b", "api.example/c", "api.example/d"])
        #expect(trace.discarded == [1, 2, 3])
    }

    @Test("follow(max: 2) fails on the third redirect with the redirect as the response, every answer let go of once")
    func oneTooMany() async throws {
        let (result, trace) = await Self.run(try Self.request(.follow(max: 2)), script: Self.chain)
        guard case .failure(let error) = result else {
            Issue.record("follow(max: 2) followed three redirects")
            return
        }
        #expect(error.code == .invalidResponse)
        #expect(error.detail == "too many redirects (more than 2)")
        #expect(error.response?.status == .found)
        #expect(error.request.percentEncodedPath == "/c")
        #expect(trace.sent.count == 3)
        #expect(trace.discarded == [1, 2, 3])
    }

    @Test("sameOrigin follows on its origin and hands over a redirect elsewhere unfollowed, and kept")
    func sameOrigin() async throws {
        let script = ["/a": "/b", "/b": "http://elsewhere.example/c"]
        let (result, trace) = await Self.run(try Self.request(.sameOrigin(max: 5)), script: script)
        let answer = try result.get()
        #expect(answer.response.status == .found)
        #expect(answer.hop == 2)
        #expect(trace.sent == ["api.example/a", "api.example/b"])
        #expect(trace.discarded == [1])

        let (limited, limitedTrace) = await Self.run(try Self.request(.sameOrigin(max: 1)), script: Self.chain)
        guard case .failure(let error) = limited else {
            Issue.record("sameOrigin(max: 1) followed two redirects")
            return
        }
        #expect(error.detail == "too many redirects (more than 1)")
        #expect(limitedTrace.discarded == [1, 2])
    }

    @Test("never: the redirect is the answer; one hop, nothing let go of")
    func never() async throws {
        let (result, trace) = await Self.run(try Self.request(.never), script: Self.chain)
        let answer = try result.get()
        #expect(answer.response.status == .found)
        #expect(trace.sent == ["api.example/a"])
        #expect(trace.discarded.isEmpty)
    }

    @Test("a Location with another scheme fails the call, and its answer is let go of")
    func unusableScheme() async throws {
        let (result, trace) = await Self.run(try Self.request(.follow(max: 5)), script: ["/a": "ftp://files.example/x"])
        guard case .failure(let error) = result else {
            Issue.record("an ftp redirect was followed or returned")
            return
        }
        #expect(error.code == .invalidResponse)
        #expect(trace.sent.count == 1)
        #expect(trace.discarded == [1])
    }

    @Test("the timeout covers every hop: one spent by a slow hop fails before the next is sent; none left, none is sent")
    func timeoutAcrossHops() async throws {
        let (result, trace) = await Self.run(
            try Self.request(.follow(max: 5)), script: Self.chain, timeout: .milliseconds(50), delay: .milliseconds(80))
        guard case .failure(let error) = result else {
            Issue.record("a call past its timeout went on")
            return
        }
        #expect(error.code == .timedOut)
        #expect(error.detail?.contains("after 1 redirects") == true)
        #expect(trace.sent.count == 1)
        #expect(trace.discarded == [1])

        for policy: RedirectPolicy in [.never, .follow(max: 5)] {
            let (spent, spentTrace) = await Self.run(try Self.request(policy), script: Self.chain, timeout: .zero)
            guard case .failure(let error) = spent else {
                Issue.record("\(policy): a call with no time sent a request")
                continue
            }
            #expect(error.code == .timedOut)
            #expect(spentTrace.sent.isEmpty)
        }
    }

    @Test("CatenaError is one pointer: every throws(CatenaError) async call keeps a buffer its size in its frame")
    func errorSize() throws {
        #expect(MemoryLayout<CatenaError>.size == MemoryLayout<UnsafeRawPointer>.size)
        var error = CatenaError(.timedOut, request: try Self.request(.never), detail: "first")
        let copy = error
        error.detail = "second"
        error.code = .cancelled
        #expect(copy.detail == "first" && copy.code == .timedOut)
        #expect(error.detail == "second" && error.code == .cancelled && error.request.percentEncodedPath == "/a")
    }
}
