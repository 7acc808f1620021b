import Catena
import CatenaAsyncHTTPClient
import CatenaOperations
import Foundation
import HTTPTypes
import Testing
@testable import CatenaTestSupport

/// A payment must not be applied twice because an operation retried it.
@Suite("Retrying operations and non-idempotent requests")
struct RetryingIdempotencyTests {
    static func order(_ item: String, hold: Double? = nil, key: IdempotencyKey, timeout: Duration) async throws -> APIRequest {
        let base = try await TestServer.running().baseURL.absoluteString
        var request = try APIRequest(
            .post, urlString: base + "/api/orders" + (hold.map { "?hold=\($0)" } ?? ""),
            body: .data(Data(#"{"item":"\#(item)"}"#.utf8), contentType: "application/json"))
        request[option: IdempotencyKey.self] = key
        request.timeout = timeout
        return request
    }

    static func count(_ item: String) async throws -> Int {
        let base = try await TestServer.running().baseURL.absoluteString
        let response = try await TransportKind.asyncHTTPClient.make().load(try APIRequest(.get, urlString: base + "/api/orders/count?item=\(item)"))
        return try JSONDecoder().decode([String: Int].self, from: response.body)["count"] ?? -1
    }

    @Test("a POST whose answer was lost is sent again with the same generated key: the server makes one order", arguments: TransportKind.allCases)
    func sameKeyAcrossAttempts(kind: TransportKind) async throws {
        let item = UUID().uuidString
        // A client of its own: the second attempt must not queue behind the shared test
        // client's connections to the same server, which other suites keep busy, nor
        // (corelibs URLSession) behind the connection of the attempt it cancelled.
        let own = kind == .asyncHTTPClient ? AsyncHTTPClientTransport(configuration: AsyncHTTPClientTransport.defaultConfiguration) : nil
        defer { Task { try? await own?.shutdown() } }
        let transport: any HTTPLoader = own ?? URLSessionTransport(configuration: URLSessionTransport.defaultConfiguration)
        let failures = Locked<[String]>([])
        // The order is made, then its answer held past the attempt's timeout; the second
        // attempt comes after the hold and gets the stored answer. Each attempt has 2 s, so
        // that the second's answer arrives in time on a loaded two-core machine.
        let request = try await Self.order(item, hold: Timing.stretch(3.5), key: .generated, timeout: Timing.stretch(.seconds(2)))
        let operation = RetryingOperation(
            strategy: .backoff(maxAttempts: 3, delay: .constant(Timing.stretch(.seconds(2.5))), if: OperationRetryStrategy.transientHTTPFailure)
        ) { _ in
            TaskOperation { () async throws -> APIResponse in
                do {
                    return try await transport.load(request)
                } catch {
                    failures.withLock { $0.append("\(error)") }
                    throw error
                }
            }
        }
        let response = try await operation.value(on: OperationQueue())
        // At least one attempt timed out; on a loaded run the second may too, and the third is answered from the store.
        #expect(operation.attempts >= 2, "\(failures.withLock { $0 })")
        #expect(response.status.code == 201 && response.headerFields[HTTPField.Name("Idempotent-Replayed")!] == "true", "\(response.status)")
        #expect(try await Self.count(item) == 1, "one order, not one per attempt")
    }

    @Test("a POST without a key is never sent again, whatever the strategy says", arguments: TransportKind.allCases)
    func noKeyNoResend(kind: TransportKind) async throws {
        let base = try await TestServer.running().baseURL.absoluteString
        let request = try APIRequest(.post, urlString: base + "/api/status/503", body: .data(Data("{}".utf8), contentType: "application/json"))
        let transport = kind.make()
        let operation = RetryingOperation(strategy: .repeat(times: 4)) { _ in
            TaskOperation { () async throws -> APIResponse in try await transport.load(request).validateStatus() }
        }
        let response = try? await operation.value(on: OperationQueue())
        #expect(response == nil)
        #expect(operation.attempts == 1)
        // A GET is idempotent: it is retried as the strategy says.
        let get = RetryingOperation(strategy: .repeat(times: 3)) { _ in
            TaskOperation { () async throws -> APIResponse in
                try await transport.load(try APIRequest(.get, urlString: base + "/api/status/503")).validateStatus()
            }
        }
        _ = try? await get.value(on: OperationQueue())
        #expect(get.attempts == 3)
    }

    struct UnreadableAnswer: Error {}

    @Test("whatever fails after a keyless POST went out (a decoding error, say), the attempt is not made again", arguments: TransportKind.allCases)
    func failureAfterKeylessPost(kind: TransportKind) async throws {
        let base = try await TestServer.running().baseURL.absoluteString
        let transport = kind.make()
        let sent = Locked(0)
        let operation = RetryingOperation(strategy: .repeat(times: 3)) { _ in
            TaskOperation { () async throws -> APIResponse in
                _ = try await transport.load(try APIRequest(.post, urlString: base + "/api/echo", body: .text("pay 10")))
                sent.withLock { $0 += 1 }
                throw UnreadableAnswer()
            }
        }
        let response = try? await operation.value(on: OperationQueue())
        #expect(response == nil)
        #expect(operation.attempts == 1 && sent.withLock { $0 } == 1)
    }

    @Test("two keyed POSTs in one attempt: the second gets a key of its own, and the attempt is not made again", arguments: TransportKind.allCases)
    func twoPostsInOneAttempt(kind: TransportKind) async throws {
        let transport = kind.make()
        let first = UUID().uuidString, second = UUID().uuidString
        let operation = RetryingOperation(strategy: .repeat(times: 3)) { _ in
            TaskOperation { () async throws -> APIResponse in
                _ = try await transport.load(try await Self.order(first, key: .generated, timeout: .seconds(10))).validateStatus()
                _ = try await transport.load(try await Self.order(second, key: .generated, timeout: .seconds(10))).validateStatus()
                throw UnreadableAnswer()
            }
        }
        _ = try? await operation.value(on: OperationQueue())
        #expect(operation.attempts == 1)
        let counts = (try await Self.count(first), try await Self.count(second))
        #expect(counts == (1, 1), "two orders, each with its own key")
    }
}
