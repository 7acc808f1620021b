import Catena
import CatenaOperations
import FlickrAPI
import Foundation
import ReqresAPI
import Testing
@testable import CatenaTestSupport

@Suite("CatenaOperations against the demo server")
struct OperationsIntegrationTests {
    @Test("the users chain: user list, then the first user, as endpoint operations", arguments: TransportKind.allCases)
    func usersChain(kind: TransportKind) async throws {
        let client = try await demoClient(kind)
        let chain = EndpointOperation(client: client, endpoint: ListUsersEndpoint(page: 2))
            .passesResult(to: EndpointOperation(client: client) { (list: UserPage) in UserEndpoint(id: list.data[0].id) })
        let user = try await chain.value(on: OperationQueue())
        #expect(user.id == 7)
    }

    @Test("an HTTP error passes forward to the end of the chain", arguments: TransportKind.allCases)
    func errorReachesTheEnd(kind: TransportKind) async throws {
        let client = try await demoClient(kind)
        let decodeRan = Tally()
        let chain = EndpointOperation(client: client, endpoint: UserEndpoint(id: 999))
            .passesResult(
                to: TransformOperation { (user: User) in
                    decodeRan.add("decode"); return user.email
                })
        let error = await #expect(throws: CatenaError.self) { try await chain.value(on: OperationQueue()) }
        #expect(error?.code == .unacceptableStatus)
        #expect(error?.response?.status.code == 404)
        #expect(decodeRan.all.isEmpty)
    }

    @Test("cancelling an endpoint operation cancels the request in flight", arguments: TransportKind.allCases)
    func cancelInFlight(kind: TransportKind) async throws {
        let key = uniqueKey()
        let loader = try await kind.chain()
        let operation = RequestOperation(loader: loader, request: try holdRequest(key, hold: Timing.stretch(10)))
        operation.enqueue(on: OperationQueue())
        let seen = try await Timing.eventually(within: .seconds(8)) { try await inFlightStats(key).current == 1 }
        #expect(seen, "the request reached the server")
        let start = ContinuousClock.now
        operation.cancel()
        let failure = await operation.result().failure
        #expect((failure as? CatenaError)?.code == .cancelled)
        #expect(failure.map(OperationError.isCancellation) == true)
        // The server holds 10 s; 5 s after the cancel leaves room for a loaded run.
        #expect(ContinuousClock.now - start < Timing.stretch(.seconds(5)), "cancelled, not waited out")
    }

    @Test("a group of retrying getSizes operations: one result per photo, in order")
    func photoGroup() async throws {
        let client = try await demoClient()
        let recent = try await EndpointOperation(client: client, endpoint: GetRecentEndpoint(perPage: 6)).value(on: OperationQueue())
        let sizes: [ResultOperation<PhotoSizes>] = recent.photos.photo.map { photo in
            RetryingOperation(strategy: .repeat(times: 2)) { _ in
                EndpointOperation(client: client, endpoint: GetSizesEndpoint(photoID: photo.id))
            }
        }
        let results = try await GroupOperation.collecting(sizes, maxConcurrent: 3).value(on: OperationQueue())
        #expect(results.count == 6)
        #expect(results.allSatisfy { ((try? $0.get())?.sizes.size.count ?? 0) > 0 })
    }

    @Test("a retrying endpoint operation gets past a 503 with a fresh request")
    func retryPastFailure() async throws {
        let client = try await demoClient()
        let key = uniqueKey()
        let made = Tally()
        let operation = RetryingOperation(strategy: .backoff(maxAttempts: 3, delay: .constant(.milliseconds(10)))) { _ in
            made.add("attempt")
            return EndpointOperation(client: client, endpoint: FlakyEndpoint(key: key))
        }
        #expect(try await operation.value(on: OperationQueue()).call == 2)
        #expect(made.all["attempt"] == 2)
    }
}

/// `/api/flaky`: fails the first call per key with 503, then answers `{"call": n}`.
struct FlakyEndpoint: JSONEndpoint {
    struct Calls: Decodable, Sendable { let call: Int }
    typealias Content = Calls
    let key: String
    func makeRequest() throws -> APIRequest {
        try APIRequest(.get, path: ["api", "flaky"], query: [URLQueryItem(name: "key", value: key)])
    }
}
