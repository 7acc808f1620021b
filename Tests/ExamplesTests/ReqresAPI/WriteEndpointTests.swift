import Catena
import ReqresAPI
import Testing
@testable import CatenaTestSupport

@Suite("ReqresAPI: CreateUserEndpoint, UpdateUserEndpoint, DeleteUserEndpoint")
struct WriteEndpointTests {
    @Test("create answers 201 with an id and createdAt")
    func create() async throws {
        let sent = try await demoClient().sendWithMetadata(CreateUserEndpoint(UserFields(name: "morpheus", job: "leader")))
        #expect(sent.status == .created)
        #expect(sent.content.name == "morpheus")
        #expect(!sent.content.id.isEmpty)
        let error = await #expect(throws: CatenaError.self) { try await demoClient().send(CreateUserEndpoint(UserFields(job: "x"))) }
        #expect(error?.detail == "CreateUserEndpoint: name must not be empty")
    }

    @Test("update by PATCH and PUT answers updatedAt", arguments: [false, true])
    func update(replace: Bool) async throws {
        let updated = try await demoClient().send(UpdateUserEndpoint(id: 2, fields: UserFields(name: "neo", job: "the one"), replace: replace))
        #expect(updated.job == "the one")
        #expect(!updated.updatedAt.isEmpty)
    }

    @Test("delete is a Void endpoint that accepts 204; an unknown id fails")
    func delete() async throws {
        try await demoClient().send(DeleteUserEndpoint(id: 2))
        let error = await #expect(throws: CatenaError.self) { try await demoClient().send(DeleteUserEndpoint(id: 50)) }
        #expect(error?.response?.status == .notFound)
    }
}
