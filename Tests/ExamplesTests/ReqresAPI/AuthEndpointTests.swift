import Catena
import ReqresAPI
import Testing
@testable import CatenaTestSupport

@Suite("ReqresAPI: LoginEndpoint, RegisterEndpoint")
struct AuthEndpointTests {
    @Test("login gives a token")
    func login() async throws {
        let token = try await demoClient().send(LoginEndpoint(email: "eve.holt@reqres.in", password: "cityslicka"))
        #expect(!token.token.isEmpty)
    }

    @Test("register gives an id and a token")
    func register() async throws {
        let registration = try await demoClient().send(RegisterEndpoint(email: "eve.holt@reqres.in", password: "pistol"))
        #expect(registration.id == 4)
    }

    @Test("a missing password is a 400 whose API error body is decoded")
    func missingPassword() async throws {
        let login = await #expect(throws: CatenaError.self) { try await demoClient().send(LoginEndpoint(email: "eve.holt@reqres.in", password: nil)) }
        #expect(login?.code == .unacceptableStatus)
        #expect(login?.response?.status == .badRequest)
        #expect(login?.apiError(as: ReqresError.self) == ReqresError(error: "Missing password"))
        let register = await #expect(throws: CatenaError.self) { try await demoClient().send(RegisterEndpoint(email: "eve.holt@reqres.in", password: nil)) }
        #expect(register?.apiError(as: ReqresError.self)?.error == "Missing password")
    }
}
