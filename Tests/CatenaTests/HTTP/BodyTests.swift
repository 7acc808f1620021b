import Catena
import CatenaTesting
import Foundation
import HTTPTypes
import Testing

@Suite("Bodies")
struct BodyTests {
    struct Payload: Codable, Sendable, Equatable {
        let name: String
        let job: String
    }

    @Test("a JSON body brings its Content-Type and produces the same bytes on every attempt")
    func jsonBodyIsReproducible() async throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let body = APIRequest.Body.json(Payload(name: "morpheus", job: "leader"), encoder: encoder)
        #expect(body.contentType == "application/json")
        let first = try #require(try await body.makeData())
        let second = try #require(try await body.makeData())
        #expect(first == second)
        #expect(String(decoding: first, as: UTF8.self) == #"{"job":"leader","name":"morpheus"}"#)
    }

    @Test("a body that cannot be encoded fails the request as invalid, naming the body, and is never sent")
    func encodingFailureIsInvalidRequest() async throws {
        let mock = MockTransport()
        mock.respond(status: .ok)
        let request = try APIRequest(.post, path: ["x"], body: .json(["value": Double.nan]))
        let error = await #expect(throws: CatenaError.self) { try await mock.load(request) }
        #expect(error?.code == .invalidRequest)
        #expect(error?.description.contains("JSON") == true)
        #expect(mock.pendingHandlers == 1)
    }

    @Test("form fields are encoded as HTML forms do")
    func formEncoding() async throws {
        let body = APIRequest.Body.form([(name: "email", value: "eve.holt@reqres.in"), (name: "pass word", value: "a&b=c+d é")])
        #expect(body.contentType == "application/x-www-form-urlencoded")
        let text = String(decoding: try #require(try await body.makeData()), as: UTF8.self)
        #expect(text == "email=eve.holt%40reqres.in&pass+word=a%26b%3Dc%2Bd+%C3%A9")
    }

    @Test("multipart bodies follow RFC 7578 and escape quotes and line breaks in names")
    func multipartEncoding() async throws {
        var form = MultipartForm(boundary: "XyZ")
        form.append(.init(name: "title", value: "Hello"))
        form.append(.init(name: "file\"\r\nX-Evil: 1", filename: "a.txt", data: Data("content".utf8)))
        let body = APIRequest.Body.multipart(form)
        #expect(body.contentType == "multipart/form-data; boundary=XyZ")
        let text = String(decoding: try #require(try await body.makeData()), as: UTF8.self)
        #expect(
            text == """
                --XyZ\r
                Content-Disposition: form-data; name="title"\r
                \r
                Hello\r
                --XyZ\r
                Content-Disposition: form-data; name="file%22%0D%0AX-Evil: 1"; filename="a.txt"\r
                Content-Type: application/octet-stream\r
                \r
                content\r
                --XyZ--\r

                """)
    }

    @Test("the empty body has no bytes and no Content-Type")
    func emptyBody() async throws {
        #expect(APIRequest.Body.empty.isEmpty)
        #expect(try await APIRequest.Body.empty.makeData() == nil)
        #expect(APIRequest.Body.empty.contentType == nil)
        #expect(APIRequest.Body.text("hi").contentType == "text/plain; charset=utf-8")
    }
}

@Suite("Responses and errors")
struct ResponseTests {
    struct User: Decodable { let id: Int; let name: String }

    func response(_ status: HTTPResponse.Status, _ body: String) throws -> APIResponse {
        APIResponse(
            status: status, headerFields: [.contentType: "application/json"], body: Data(body.utf8),
            request: try APIRequest(.get, urlString: "http://127.0.0.1:8080/api/users/1"))
    }

    @Test("decoding failures name the type and where decoding stopped")
    func decodingFailureNamesTypeAndPath() throws {
        let error = #expect(throws: CatenaError.self) { try response(.ok, #"{"id": 1}"#).decode(User.self) }
        #expect(error?.code == .decodingFailed)
        #expect(error?.response?.status == .ok)
        #expect(error?.description.contains("User") == true)
        #expect(error?.description.contains("missing key \"name\"") == true)

        let notJSON = #expect(throws: CatenaError.self) { try response(.ok, "<html>").decode(User.self) }
        #expect(notJSON?.code == .decodingFailed)

        let empty = #expect(throws: CatenaError.self) { try response(.ok, "").decode(User.self) }
        #expect(empty?.detail == "expected User but the body is empty")
    }

    @Test("status validation passes 2xx and throws unacceptableStatus with the response otherwise")
    func statusValidation() throws {
        #expect(try response(.created, "{}").validateStatus().status == .created)
        let error = #expect(throws: CatenaError.self) { try response(.notFound, "{}").validateStatus() }
        #expect(error?.code == .unacceptableStatus)
        #expect(error?.response?.status.code == 404)
        #expect(error?.description == "GET http://127.0.0.1:8080/api/users/1: unacceptable status 404 Not Found")
    }

    @Test("wrapping keeps CatenaErrors and turns CancellationError into cancelled")
    func wrapping() throws {
        let request = try APIRequest(.get, path: ["x"])
        #expect(CatenaError.wrapping(CancellationError(), request: request).code == .cancelled)
        let timedOut = CatenaError(.timedOut, request: request)
        #expect(CatenaError.wrapping(timedOut, request: request, code: .unknown).code == .timedOut)
        #expect(CatenaError.wrapping(URLError(.badURL), request: request, code: .invalidRequest).code == .invalidRequest)
    }
}
