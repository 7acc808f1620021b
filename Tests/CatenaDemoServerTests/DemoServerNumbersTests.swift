import Catena
import Foundation
import HTTPTypes
import Testing
@testable import CatenaTestSupport

/// The demo server runs inside users' test processes and under `catena serve`: a bad
/// number in a request gets a 400 that names it, never a trap.
@Suite("The demo server refuses bad numbers")
struct DemoServerNumbersTests {
    static let cases: [(path: [String], name: String)] = [
        (["api", "users", "2"], "delay"),
        (["api", "users"], "page"),
        (["api", "drip"], "interval"),
        (["api", "inflight"], "hold"),
    ]

    @Test(
        "nan, inf, 1e308, -1 and a 30-digit page are each a 400 naming the parameter",
        arguments: ["nan", "inf", "-inf", "1e308", "-1", "999999999999999999999999999999", "abc"])
    func refused(value: String) async throws {
        let chain = try await TransportKind.asyncHTTPClient.chain(timeout: Timing.stretch(.seconds(10)))
        for (path, name) in Self.cases {
            let response = try await chain.load(try APIRequest(.get, path: path, query: [URLQueryItem(name: name, value: value)]))
            #expect(response.status == .badRequest, "\(name)=\(value) on /\(path.joined(separator: "/")): \(response.status.code)")
            #expect(String(decoding: response.body, as: UTF8.self).contains(name))
        }
        let token = try await chain.load(
            try APIRequest(
                .post, path: ["oauth", "token"],
                body: .form([
                    (name: "grant_type", value: "password"), (name: "username", value: "eve.holt@reqres.in"),
                    (name: "password", value: "cityslicka"), (name: "expires_in", value: value),
                ])))
        #expect(token.status == .badRequest, "expires_in=\(value)")
        // And the server is still up.
        #expect(try await chain.load(try APIRequest(.get, path: ["api", "users", "2"])).status == .ok)
    }
}
