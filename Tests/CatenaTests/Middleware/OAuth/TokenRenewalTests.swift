@testable import Catena
import CatenaAsyncHTTPClient
import CatenaDemoServer
import Foundation
import HTTPTypes
import Testing
@testable import CatenaTestSupport

/// When a 401 renews a token: once for an `invalid_token`, never for an
/// `insufficient_scope`, and not again for every call when the server refuses renewed
/// tokens too. Against the demo server's protected routes, on both transports.
@Suite("Token renewal on 401: once, and never per call")
struct TokenRenewalTests {
    private func middleware(_ id: String, kind: TransportKind) async throws -> TokenAuthMiddleware {
        let client = try await OAuthFlowTests.client(id, .clientSecretBasic(OAuthFlowTests.secret), kind: kind)
        return TokenAuthMiddleware(hosts: [try await TestServer.authority()], client: client, signIn: .clientCredentials())
    }

    @Test(
        "a server that refuses renewed tokens too: the call fails as authenticationFailed, and later calls spend no token request",
        arguments: TransportKind.allCases)
    func refusedAfterRenewal(kind: TransportKind) async throws {
        let id = OAuthFlowTests.clientID("catena-service")
        let auth = try await middleware(id, kind: kind)
        let chain = EnvironmentMiddleware(try await TestServer.environment()) --> auth --> kind.make()
        let first = await #expect(throws: CatenaError.self) { try await chain.load(try APIRequest(.get, path: ["api", "protected", "refusing"])) }
        #expect(first?.code == .authenticationFailed)
        #expect(first?.response?.status == .unauthorized)
        // The sign-in, and the one renewal the first 401 earned.
        #expect(try await OAuthFlowTests.stats(id).clientCredentials == 2)
        for _ in 0..<3 {
            let again = await #expect(throws: CatenaError.self) { try await chain.load(try APIRequest(.get, path: ["api", "protected", "refusing"])) }
            #expect(again?.code == .authenticationFailed)
        }
        #expect(try await OAuthFlowTests.stats(id).clientCredentials == 2, "no token request per call")
        // The token itself is good elsewhere on the origin.
        #expect(try await chain.load(try APIRequest(.get, path: ["api", "protected", "me"])).status == .ok)
    }

    @Test(
        "20 calls at once to a server that refuses every token: one sign-in and one renewal in all, whichever call saw the renewed token refused first",
        arguments: TransportKind.allCases)
    func refusedAfterRenewalConcurrently(kind: TransportKind) async throws {
        let id = OAuthFlowTests.clientID("catena-service")
        let auth = try await middleware(id, kind: kind)
        let chain = EnvironmentMiddleware(try await TestServer.environment()) --> auth --> kind.make()
        let codes: [CatenaError.Code?] = await withTaskGroup(of: CatenaError.Code?.self) { group in
            for _ in 0..<20 {
                group.addTask {
                    do {
                        _ = try await chain.load(try APIRequest(.get, path: ["api", "protected", "refusing"]))
                        return nil
                    } catch let error as CatenaError {
                        return error.code
                    } catch {
                        return .invalidRequest
                    }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(codes.count == 20 && codes.allSatisfy { $0 == .authenticationFailed }, "\(codes)")
        #expect(try await OAuthFlowTests.stats(id).clientCredentials == 2, "a sign-in and one renewal")
    }

    @Test("insufficient_scope: the 401 is the answer, and no token is fetched for it", arguments: TransportKind.allCases)
    func insufficientScope(kind: TransportKind) async throws {
        let id = OAuthFlowTests.clientID("catena-service")
        let auth = try await middleware(id, kind: kind)
        let chain = EnvironmentMiddleware(try await TestServer.environment()) --> auth --> kind.make()
        let response = try await chain.load(try APIRequest(.get, path: ["api", "protected", "admin"]))
        #expect(response.status == .unauthorized)
        #expect(try await OAuthFlowTests.stats(id).clientCredentials == 1, "the sign-in only")
        // With a validating loader below, the same answer arrives as the error it was.
        let validated = EnvironmentMiddleware(try await TestServer.environment()) --> auth --> ValidationMiddleware() --> kind.make()
        let error = await #expect(throws: CatenaError.self) { try await validated.load(try APIRequest(.get, path: ["api", "protected", "admin"])) }
        #expect(error?.code == .unacceptableStatus)
        #expect(try await OAuthFlowTests.stats(id).clientCredentials == 1)
    }

    @Test("Bearer challenges as servers write them: the error and scope, whatever else stands around them")
    func challenges() {
        func read(_ values: String...) -> BearerChallenge? {
            var fields = HTTPFields()
            for value in values { fields.append(HTTPField(name: .wwwAuthenticate, value: value)) }
            return BearerChallenge(in: fields)
        }
        #expect(read(#"Bearer error="invalid_token""#)?.error == "invalid_token")
        #expect(
            read(#"Bearer realm="example", error="insufficient_scope", scope="admin write""#)
                == BearerChallenge(error: "insufficient_scope", scope: "admin write"))
        #expect(read(#"Basic realm="x", Bearer error=invalid_token"#)?.error == "invalid_token")
        #expect(read(#"Negotiate abc==, Bearer realm="a\"b", error="insufficient_scope""#)?.error == "insufficient_scope")
        #expect(read("Basic realm=\"x\"", "bearer ERROR=\"invalid_token\"")?.error == "invalid_token")
        #expect(read(#"Bearer"#) == BearerChallenge(error: nil, scope: nil))
        #expect(read(#"Basic realm="Bearer error=invalid_token""#) == nil, "a quoted string is no challenge")
        #expect(read(#"Bearer realm="x", Basic error="insufficient_scope""#)?.error == nil, "another scheme's parameters are not Bearer's")
        #expect(read("Bearer error=\"\u{1B}[2Jx\"")?.error == " [2Jx", "printable")
    }

    @Test("random challenges never trap or hang, and what they yield is printable")
    func challengeFuzz() async {
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
        let pieces = ["Bearer", "Basic", " ", ",", "=", "\"", "\\", "error", "scope", "realm", "invalid_token", "==", "\u{7F}", "\u{202E}", "\t", "a"]
        for round in 0..<2_000 {
            let text = (0..<Int.random(in: 0..<30, using: &generator)).map { _ in pieces[Int.random(in: 0..<pieces.count, using: &generator)] }.joined()
            var fields = HTTPFields()
            fields.append(HTTPField(name: .wwwAuthenticate, value: text))
            if let challenge = BearerChallenge(in: fields) {
                for text in [challenge.error, challenge.scope].compactMap({ $0 }) {
                    #expect(!text.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x202E || $0.value == 0x7F }, "seed \(seed)")
                }
            }
            if round % 100 == 0 { await Task.yield() }
        }
    }
}
