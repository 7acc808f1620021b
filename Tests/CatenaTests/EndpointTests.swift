import Catena
import CatenaTesting
import Foundation
import Testing

@Suite("Endpoint kinds on the mock transport")
struct EndpointKindTests {
    struct Text: StringEndpoint {
        func makeRequest() throws -> APIRequest { try APIRequest(.get, urlString: "http://example.com/text") }
    }

    struct Bytes: DataEndpoint {
        func makeRequest() throws -> APIRequest { try APIRequest(.get, urlString: "http://example.com/bytes") }
    }

    @Test("string and data endpoints return the body; text that is not UTF-8 is decodingFailed")
    func stringAndData() async throws {
        let mock = MockTransport()
        mock.respond(body: Data("héllo".utf8))
        mock.respond(body: Data([0, 1, 2]))
        mock.respond(body: Data([0xFF, 0xFE]))
        let client = Client(mock)
        #expect(try await client.send(Text()) == "héllo")
        #expect(try await client.send(Bytes()) == Data([0, 1, 2]))
        let error = await #expect(throws: CatenaError.self) { try await client.send(Text()) }
        #expect(error?.code == .decodingFailed)
    }

    @Test("a trailing slash is added once, explicitly")
    func trailingSlash() throws {
        var request = try APIRequest.get("services", "rest")
        request.appendTrailingSlash()
        request.appendTrailingSlash()
        #expect(request.percentEncodedPath == "/services/rest/")
    }
}
