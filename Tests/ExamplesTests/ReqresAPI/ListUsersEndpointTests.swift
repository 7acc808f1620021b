import Catena
import ReqresAPI
import Testing
@testable import CatenaTestSupport

@Suite("ReqresAPI: ListUsersEndpoint")
struct ListUsersEndpointTests {
    @Test("pages through 12 users, 6 per page by default", arguments: TransportKind.allCases)
    func paging(kind: TransportKind) async throws {
        let client = try await demoClient(kind)
        let first = try await client.send(ListUsersEndpoint())
        #expect(first.data.map(\.id) == Array(1...6))
        #expect(first.totalPages == 2)
        let last = try await client.send(ListUsersEndpoint(page: 3, perPage: 5))
        #expect(last.data.map(\.id) == [11, 12])
    }

    @Test("bad input is invalidRequest naming the endpoint and the field, and sends nothing")
    func badInput() async throws {
        let client = try await demoClient()
        let error = await #expect(throws: CatenaError.self) { try await client.send(ListUsersEndpoint(page: 0)) }
        #expect(error?.code == .invalidRequest)
        #expect(error?.description == "invalid request: ListUsersEndpoint: page must be 1 or more, not 0")
        #expect((error?.underlyingError as? EndpointInputError)?.field == "page")
    }
}
