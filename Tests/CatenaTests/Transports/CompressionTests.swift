import AsyncHTTPClient
@testable import Catena
@testable import CatenaAsyncHTTPClient
@testable import CatenaDemoServer
import Foundation
import HTTPTypes
import Testing
@testable import CatenaTestSupport

@Suite("The demo server compresses like a real one")
struct CompressionTests {
    @Test(
        "a large JSON body arrives compressed and is decoded by the transport",
        arguments: TransportKind.allCases, [nil, "gzip", "deflate", "gzip;q=0, deflate"])
    func decoded(kind: TransportKind, asked: String?) async throws {
        let chain = try await kind.chain()
        var request = try APIRequest(.get, path: ["api", "users"], query: [URLQueryItem(name: "per_page", value: "12")])
        if let asked { request.headerFields[.acceptEncoding] = asked }
        let response = try await chain.load(request)
        #expect(response.status == .ok)
        let encoding = response.headerFields[.contentEncoding]
        let expected = asked == nil ? "gzip" : asked!.hasSuffix("deflate") ? "deflate" : "gzip"
        #expect(encoding == expected, "\(kind) asked for \(asked ?? "the default") and got \(encoding ?? "none")")
        let object = try JSONSerialization.jsonObject(with: response.body) as? [String: Any]
        #expect((object?["data"] as? [Any])?.count == 12)
    }

    @Test("asking for no compression gets none; small bodies are never compressed", arguments: TransportKind.allCases)
    func identity(kind: TransportKind) async throws {
        let chain = try await kind.chain()
        let plain = try await chain.load(
            try APIRequest(
                .get, path: ["api", "users"], query: [URLQueryItem(name: "per_page", value: "12")],
                headerFields: [.acceptEncoding: "identity"]))
        #expect(plain.headerFields[.contentEncoding] == nil)
        #expect(try JSONSerialization.jsonObject(with: plain.body) is [String: Any])
        let small = try await chain.load(try APIRequest(.get, path: ["api", "users", "2"]))
        #expect(small.headerFields[.contentEncoding] == nil)
    }
}
