import Catena
import CatenaTesting
import Foundation
import HTTPTypes
import Testing
import CatenaDemoServer

@Suite("Content codings a response may arrive in")
struct ContentCodingTests {
    let request = try! APIRequest(.get, urlString: "http://127.0.0.1/x")

    func check(_ values: [String], status: Int = 200, asked: String? = nil, decodes: Bool = false) -> CatenaError? {
        var request = request
        if let asked { request.headerFields[.acceptEncoding] = asked }
        do {
            try ContentCoding.check(contentEncoding: values, status: status, request: request) { _ in decodes }
            return nil
        } catch {
            return error
        }
    }

    @Test("codings are read case-blind, comma-split, identity and blanks left out")
    func parsing() {
        #expect(ContentCoding.codings(["GZIP , identity", "br", " ,"]) == ["gzip", "br"])
        #expect(ContentCoding.acceptedCodings("gzip;q=0.5, BR;q=0, deflate;q=0.000, *;q=1, ;q=1") == ["gzip", "*"])
        #expect(ContentCoding.members(["Identity, GZIP", " "]) == ["identity", "gzip"])
        // A coding refused by name stays refused whatever `*` says (RFC 9110, 12.5.3).
        #expect(!ContentCoding.accepts("br;q=0, *", coding: "br"))
        #expect(ContentCoding.accepts("br;q=0, *", coding: "zstd"))
        #expect(!ContentCoding.accepts("*;q=0, gzip", coding: "br"))
    }

    @Test("an undecoded coding fails naming it, unless the request asked for it; no body, no check")
    func outcomes() {
        #expect(check([]) == nil)
        #expect(check(["identity"]) == nil)
        #expect(check(["gzip"], decodes: true) == nil)
        let failure = check(["br"])
        #expect(failure?.code == .invalidResponse && failure?.description.contains("'br'") == true)
        #expect(check(["br"], asked: "gzip, br") == nil)
        #expect(check(["br"], asked: "*") == nil)
        #expect(check(["br"], asked: "br;q=0, gzip")?.code == .invalidResponse)
        #expect(check(["gzip", "br"], asked: "br")?.code == .invalidResponse)
        #expect(check(["br"], asked: "br;q=0, *")?.code == .invalidResponse)
        // The transport decides from the members, identity included.
        var seen: [String] = []
        _ = try? ContentCoding.check(contentEncoding: ["identity, gzip"], status: 200, request: request) {
            seen = $0; return true
        }
        #expect(seen == ["identity", "gzip"])
        for status in [101, 204, 301, 304] { #expect(check(["br"], status: status) == nil, "\(status)") }
        var head = request
        head.method = .head
        #expect(throws: Never.self) { try ContentCoding.check(contentEncoding: ["br"], status: 200, request: head) { _ in false } }
    }

    @Test("hostile Content-Encoding values never trap, and the error stays short", arguments: 0..<3)
    func hostile(round: Int) {
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
        let pieces = [",", " ", "\t", ";", "=", "q=0", "br", "gzip", "GZIP", "identity", "x-gzip", "é", "\u{0}", "*", ",,,"]
        for _ in 0..<500 {
            let count = Int(generator.next() % 8)
            let values = (0..<count).map { _ in
                (0..<Int(generator.next() % 12)).map { _ in pieces[Int(generator.next() % UInt64(pieces.count))] }.joined()
            }
            let asked = (0..<Int(generator.next() % 6)).map { _ in pieces[Int(generator.next() % UInt64(pieces.count))] }.joined()
            if let error = check(values, asked: asked) {
                #expect(error.code == .invalidResponse, "seed \(seed)")
                #expect(error.description.count < 600, "seed \(seed): \(error.description.count) characters")
            }
        }
        let many = Array(repeating: "br", count: 10_000).joined(separator: ",")
        #expect((check([many])?.description.count ?? 0) < 600)
        // One character of thousands of combining marks is cut by its bytes.
        let heavy = "e" + String(repeating: "\u{301}", count: 5_000)
        #expect((check([heavy])?.description.utf8.count ?? 0) < 600)
    }

    @Test("a redirect handed over unfollowed is checked; its single gzip counts as decoded")
    func unfollowed() throws {
        func response(_ status: Int, _ coding: String) -> APIResponse {
            APIResponse(status: HTTPResponse.Status(code: status), headerFields: [.contentEncoding: coding], body: Data(), request: request)
        }
        #expect(throws: CatenaError.self) { try ContentCoding.checkUnfollowed(response(302, "br"), request: request) }
        #expect(throws: Never.self) { try ContentCoding.checkUnfollowed(response(302, "gzip"), request: request) }
        #expect(throws: Never.self) { try ContentCoding.checkUnfollowed(response(200, "br"), request: request) }
    }
}
