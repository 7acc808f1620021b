import Catena
import ReqresAPI
import Testing
@testable import CatenaTestSupport

@Suite("ReqresAPI: UserEndpoint")
struct UserEndpointTests {
    @Test("fetches one user out of its envelope, with metadata")
    func single() async throws {
        let sent = try await demoClient().sendWithMetadata(UserEndpoint(id: 2))
        #expect(sent.content.firstName == "Janet")
        #expect(sent.status == .ok)
        #expect(sent.headerFields[.contentType]?.hasPrefix("application/json") == true)
        #expect(sent.duration > .zero)
    }

    @Test("an unknown user is unacceptableStatus 404; reqres sends no error body, so none is decoded")
    func unknown() async throws {
        let error = await #expect(throws: CatenaError.self) { try await demoClient().send(UserEndpoint(id: 99)) }
        #expect(error?.code == .unacceptableStatus)
        #expect(error?.response?.status == .notFound)
        #expect(error?.apiError(as: ReqresError.self) == nil)
    }

    @Test("an empty body where content was expected is decodingFailed")
    func emptyBody() async throws {
        struct EmptyBodyUser: JSONEndpoint {
            typealias Content = User
            func makeRequest() throws -> APIRequest { try .get("api", "status", "204") }
        }
        let error = await #expect(throws: CatenaError.self) { try await demoClient().send(EmptyBodyUser()) }
        #expect(error?.code == .decodingFailed)
        #expect(error?.detail == "expected User but the body is empty")
    }

    @Test("a body that is not JSON is decodingFailed")
    func badJSON() async throws {
        struct BytesAsUser: JSONEndpoint {
            typealias Content = User
            func makeRequest() throws -> APIRequest { try .get("api", "bytes", "32") }
        }
        let error = await #expect(throws: CatenaError.self) { try await demoClient().send(BytesAsUser()) }
        #expect(error?.code == .decodingFailed)
    }
}
