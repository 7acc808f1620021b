import AsyncHTTPClient
@testable import Catena
@testable import CatenaAsyncHTTPClient
@testable import CatenaDemoServer
import Foundation
import HTTPTypes
import Testing
@testable import CatenaTestSupport

@Suite("AsyncHTTPClient sends again after a failure before the head")
struct ResendBeforeHeadTests {
    struct Broken: Error {}

    /// The failure the transport sees when a reused connection's bytes do not parse.
    static func preHeadFailure(_ request: APIRequest) -> CatenaError {
        CatenaError(
            .invalidResponse, request: request, underlyingError: AsyncHTTPClientTransport.PreHeadFailure(error: Broken()),
            detail: "the response's framing is broken")
    }

    @Test("a failure before the head with time left is sent again, reported to the call's observers; the second answer is the answer")
    func resendsWithTimeLeft() async throws {
        var request = APIRequest(.get, url: URL(string: "http://127.0.0.1:9/x")!)
        let events = Locked<[CallEvent]>([])
        request.observe(CallObserver { event in events.withLock { $0.append(event) } })
        let attempts = Locked(0)
        let answer = try await AsyncHTTPClientTransport.resendingBeforeHead(request, within: .seconds(5)) { _ throws(CatenaError) -> Int in
            let attempt = attempts.withLock {
                $0 += 1; return $0
            }
            if attempt == 1 { throw Self.preHeadFailure(request) }
            return attempt
        }
        #expect(answer == 2)
        #expect(events.withLock { $0 } == [.resent(after: .invalidResponse)])
    }

    @Test(
        "when every attempt fails before its head, the error is the one most attempts ended with, the latest of a tie",
        arguments: [
            // A garbled answer after a stale pooled connection's close, and the other way
            // round: another response's stray bytes, then the server closing on this request.
            ([CatenaError.Code.connectionLost, .invalidResponse, .invalidResponse], CatenaError.Code.invalidResponse),
            ([.invalidResponse, .connectionLost, .connectionLost], .connectionLost),
            ([.invalidResponse, .connectionLost, .invalidResponse], .invalidResponse),
            ([.invalidResponse, .invalidResponse, .connectionLost], .invalidResponse),
            ([.connectionLost, .connectionLost, .connectionLost], .connectionLost),
            // (Not from AsyncHTTPClient, whose failures before a head are those two codes.)
            ([.connectionLost, .invalidResponse, .timedOut], .timedOut),
        ])
    func mostAttemptsDecide(codes: [CatenaError.Code], expected: CatenaError.Code) async throws {
        let request = APIRequest(.get, url: URL(string: "http://127.0.0.1:9/x")!)
        let attempts = Locked(0)
        do {
            _ = try await AsyncHTTPClientTransport.resendingBeforeHead(request, within: .seconds(5)) { _ throws(CatenaError) -> Int in
                let attempt = attempts.withLock {
                    $0 += 1; return $0
                }
                throw CatenaError(
                    codes[attempt - 1], request: request,
                    underlyingError: AsyncHTTPClientTransport.PreHeadFailure(error: Broken()), detail: "attempt \(attempt)")
            }
            Issue.record("expected the failure")
        } catch {
            #expect(error.code == expected, "\(error)")
            // Of a tie or a majority, the latest attempt with that code.
            #expect(error.detail == "attempt \(codes.lastIndex(of: expected).map { $0 + 1 } ?? 0)")
        }
        #expect(attempts.withLock { $0 } == 3)
    }

    @Test("a failure before the head with no time left is a timeout that keeps the failure; a POST is never sent again")
    func timeoutWhenNoTimeLeft() async throws {
        let request = APIRequest(.get, url: URL(string: "http://127.0.0.1:9/x")!)
        let attempts = Locked(0)
        do {
            _ = try await AsyncHTTPClientTransport.resendingBeforeHead(request, within: .milliseconds(50)) { _ throws(CatenaError) -> Int in
                attempts.withLock { $0 += 1 }
                try? await Task.sleep(for: .milliseconds(100))  // waited for a pooled connection
                throw Self.preHeadFailure(request)
            }
            Issue.record("expected a timeout")
        } catch {
            #expect(error.code == .timedOut)
            #expect(error.underlyingError is CatenaError)
            #expect(error.detail?.contains("framing is broken") == true, "\(error)")
        }
        #expect(attempts.withLock { $0 } == 1)

        let post = APIRequest(.post, url: URL(string: "http://127.0.0.1:9/x")!)
        do {
            _ = try await AsyncHTTPClientTransport.resendingBeforeHead(post, within: .seconds(5)) { _ throws(CatenaError) -> Int in
                throw Self.preHeadFailure(post)
            }
            Issue.record("expected the failure")
        } catch {
            #expect(error.code == .invalidResponse)
        }
    }
}
