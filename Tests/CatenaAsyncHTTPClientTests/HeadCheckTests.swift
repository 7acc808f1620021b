import AsyncHTTPClient
import CatenaDemoServer
import CatenaTesting
import Foundation
import NIOHTTP1
import Testing
@testable import Catena
@testable import CatenaAsyncHTTPClient
@testable import CatenaTestSupport

/// `checkHead` reads a head's framing fields in one pass over its bytes. NIO's parser
/// already refuses two Content-Lengths that disagree, so on the wire that branch is
/// shadowed: here it meets heads no parser made, against the lookups it replaced.
@Suite("AsyncHTTPClient's head check")
struct HeadCheckTests {
    private static let request = APIRequest(.get, url: URL(string: "http://127.0.0.1/head")!)

    /// What the check said before it was one pass: NIO's case-insensitive lookups, for a
    /// transport that decodes gzip and deflate.
    private static func reference(_ headers: HTTPHeaders) -> Result<Int?, CatenaError> {
        let declared = headers["Content-Length"]
        if declared.count > 1, Set(declared).count > 1 {
            return .failure(
                CatenaError(.invalidResponse, request: request, detail: "the response has \(declared.count) different Content-Length fields"))
        }
        do {
            try ContentCoding.check(contentEncoding: headers["Content-Encoding"], status: 200, request: request) {
                $0 == ["gzip"] || $0 == ["deflate"]
            }
        } catch {
            return .failure(error)
        }
        return .success(headers.first(name: "Content-Length").flatMap { Int($0) })
    }

    private static func randomCase(_ name: String, _ random: inout SplitMix64) -> String {
        String(name.map { Bool.random(using: &random) ? Character($0.uppercased()) : $0 })
    }

    @Test("seeded heads: the one-pass check agrees with NIO's lookups on error, message and declared length")
    func agreesWithLookups() throws {
        var random = SplitMix64(seed: 0x4EAD_C4EC)
        let transport = AsyncHTTPClientTransport(client: AsyncHTTPClientTransport.forTestsClient, decodesCompression: true)
        let lengths = ["0", "12", "12", "013", " 12", "-1", "99999999999999999999", "abc", ""]
        let codings = ["gzip", "deflate", "identity", "br", "gzip, br", "GZIP", "x"]
        let others = ["Content-Type", "Date", "Content-Lengths", "Content-Encodin", "X-Content-Length", "Transfer-Encoding"]
        var failures = 0
        for _ in 0..<2_000 {
            var headers = HTTPHeaders()
            for _ in 0..<Int.random(in: 0...6, using: &random) {
                switch Int.random(in: 0...2, using: &random) {
                case 0: headers.add(name: Self.randomCase("content-length", &random), value: lengths.randomElement(using: &random)!)
                case 1: headers.add(name: Self.randomCase("content-encoding", &random), value: codings.randomElement(using: &random)!)
                default: headers.add(name: others.randomElement(using: &random)!, value: lengths.randomElement(using: &random)!)
                }
            }
            let expected = Self.reference(headers)
            do {
                let declared = try transport.checkHead(status: .ok, headers: headers, request: Self.request)
                guard case .success(let length) = expected else {
                    Issue.record("\(headers): accepted, the lookups refuse it")
                    continue
                }
                #expect(declared == length, "\(headers)")
            } catch {
                failures += 1
                guard case .failure(let reference) = expected else {
                    Issue.record("\(headers): refused (\(error)), the lookups accept it")
                    continue
                }
                #expect(error.code == reference.code && error.detail == reference.detail, "\(headers): \(error)")
            }
        }
        // Both outcomes occur often enough for the comparison to mean something.
        #expect((200...1_800).contains(failures), "\(failures) of 2,000 refused")
    }

    @Test("two Content-Lengths that disagree are refused, naming how many; equal ones are one length")
    func lengths() throws {
        let transport = AsyncHTTPClientTransport(client: AsyncHTTPClientTransport.forTestsClient)
        let equal = HTTPHeaders([("Content-Length", "5"), ("content-length", "5")])
        #expect(try transport.checkHead(status: .ok, headers: equal, request: Self.request) == 5)
        // Compared by their letters' two cases only: NIO's own lookup, which masks bit 5
        // of each byte, would take a carriage return for the "-" (no parser lets one
        // into a name; here it is only a name that is not Content-Length).
        let lookalike = HTTPHeaders([("Content-Length", "5"), ("content\rlength", "6")])
        #expect(try transport.checkHead(status: .ok, headers: lookalike, request: Self.request) == 5)
        let disagreeing = HTTPHeaders([("Content-Length", "5"), ("CONTENT-LENGTH", "5"), ("content-length", "6")])
        #expect {
            try transport.checkHead(status: .ok, headers: disagreeing, request: Self.request)
        } throws: { error in
            (error as? CatenaError)?.code == .invalidResponse
                && (error as? CatenaError)?.detail == "the response has 3 different Content-Length fields"
        }
    }
}
