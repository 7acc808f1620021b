@testable import Catena
import CatenaAsyncHTTPClient
import CatenaDemoServer
import CatenaObservability
import CatenaTesting
import Foundation
import HTTPTypes
import InMemoryTracing
import Testing
@testable import CatenaTestSupport

/// Secret names as real APIs write them, in every casing and separator style, with
/// values made up per run: none may reach a HAR, a curl line, a log line, a trace
/// attribute or an error description, while the plain fields and the path still do.
@Suite("Secrets, generated: no surface shows one")
struct SecretSurfacesTests {
    /// Words of secret names real APIs send (OAuth 2, AWS, Google, Firebase, GitLab, …).
    static let secretStems: [[String]] = [
        ["access", "token"], ["refresh", "token"], ["id", "token"], ["client", "secret"], ["api", "key"], ["password"],
        ["x", "amz", "signature"], ["x", "amz", "credential"], ["x", "amz", "security", "token"], ["x", "goog", "signature"],
        ["private", "token"], ["auth", "token"], ["session", "id"], ["api", "token"], ["secret", "access", "key"],
        ["code", "verifier"], ["client", "assertion"], ["new", "password"], ["passwd"], ["subscription", "key"],
    ]
    /// Names that must stay readable, some close to secret ones.
    static let plainStems: [[String]] = [["page"], ["user", "name"], ["token", "type"], ["max", "tokens"], ["expires", "in"], ["sort", "order"]]

    /// `words` written in one of the styles APIs use.
    static func styled(_ words: [String], _ style: Int) -> String {
        let capitalized = words.map { $0.prefix(1).uppercased() + $0.dropFirst() }
        switch style % 9 {
        case 0: return words[0] + capitalized.dropFirst().joined()  // accessToken
        case 1: return capitalized.joined()  // AccessToken
        case 2: return words.joined(separator: "_")  // access_token
        case 3: return words.joined(separator: "-")  // access-token
        case 4: return words.joined(separator: ".")  // access.token
        case 5: return words.joined(separator: "_").uppercased()  // ACCESS_TOKEN
        case 6: return capitalized.joined(separator: "-")  // Access-Token
        case 7: return words.joined()  // accesstoken
        default: return words.joined().uppercased()  // ACCESSTOKEN
        }
    }

    static func value(_ prefix: String, using generator: inout SplitMix64) -> String {
        let letters = Array("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789")
        return prefix + String((0..<14).map { _ in letters[Int.random(in: 0..<letters.count, using: &generator)] })
    }

    @Test("headers, queries, forms, nested JSON, JSON as text/plain, multipart and a server's signed Location", arguments: TransportKind.allCases)
    func noSurfaceShowsASecret(kind: TransportKind) async throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
        let base = try await TestServer.running().baseURL.absoluteString
        let transport = try await kind.chain()
        for round in 0..<25 {
            func name(_ stems: [[String]]) -> String {
                Self.styled(stems.randomElement(using: &generator)!, Int.random(in: 0..<9, using: &generator))
            }
            var secrets: [String] = []
            func secret() -> String {
                let made = Self.value("S3C", using: &generator)
                secrets.append(made)
                return made
            }
            let plainName = name(Self.plainStems), plainValue = Self.value("PLAIN", using: &generator)
            let pathSegment = Self.value("PATH", using: &generator)

            var request = try APIRequest(.post, urlString: "\(base)/api/echo/\(pathSegment)")
            request.headerFields[HTTPField.Name(name(Self.secretStems))!] = secret()
            request.headerFields[.cookie] = "sid=\(secret()); theme=\(plainValue)"
            request.headerFields[HTTPField.Name("X-" + plainName.replacingOccurrences(of: ".", with: "-"))!] = plainValue
            request.appendQueryItems([URLQueryItem(name: name(Self.secretStems), value: secret()), URLQueryItem(name: plainName, value: plainValue)])
            let memberName = name(Self.secretStems), nestedName = name(Self.secretStems), partName = name(Self.secretStems)
            let memberValue = secret(), nestedValue = secret(), partValue = secret()
            let json = #"{"\#(memberName)": "\#(memberValue)", "outer": {"list": [{"\#(nestedName)": "\#(nestedValue)"}]}, "\#(plainName)": "\#(plainValue)"}"#
            switch round % 4 {
            case 0:
                request.body = .form([(memberName, memberValue), (plainName, plainValue)])
            case 1:
                request.body = .data(Data(json.utf8), contentType: "application/json")
            case 2:
                // JSON is read as JSON whatever its Content-Type says.
                request.body = .data(Data(json.utf8), contentType: "text/plain")
            default:
                request.body = .multipart(
                    MultipartForm(parts: [
                        .init(name: plainName, value: plainValue),
                        .init(name: memberName, value: memberValue),
                        .init(name: partName, filename: "key.bin", contentType: "application/octet-stream", data: Data(partValue.utf8)),
                    ]))
            }
            // A URL the server made, carrying a secret of its own.
            var signed = try APIRequest(.get, urlString: "\(base)/api/redirect-signed")
            signed.appendQueryItems([URLQueryItem(name: "name", value: name(Self.secretStems))])
            signed[option: RedirectPolicy.self] = .never

            let tracer = InMemoryTracer()
            let logs = CapturedLogs()
            let recorder = HARRecorder()
            let chain =
                TracingMiddleware(tracer: tracer) --> LogMiddleware(logger: logs.logger(level: .debug), logsCurlCommands: true) --> recorder
                --> transport
            let echoed = try await chain.load(request)
            let redirected = try await chain.load(signed)
            let location = try #require(redirected.headerFields[.location])
            secrets.append(String(try #require(location.split(separator: "=").last)))
            #expect(String(decoding: echoed.body, as: UTF8.self).contains(memberValue), "the server did echo the secrets")

            let failure = CatenaError(.unacceptableStatus, request: request, response: echoed, detail: "a test failure")
            let surfaces: [(String, String)] = [
                ("HAR", String(decoding: try recorder.har.encoded(), as: UTF8.self)),
                ("curl", request.curlDescription + signed.curlDescription),
                ("log", logs.text),
                ("trace", tracer.finishedSpans.map { "\($0.operationName) \($0.attributes)" }.joined(separator: "\n")),
                ("error", failure.description + "\(failure)"),
            ]
            for (surface, text) in surfaces {
                for secret in secrets {
                    #expect(!text.contains(secret), "seed \(seed), round \(round): \(secret) in the \(surface):\n\(text)")
                }
            }
            let har = surfaces[0].1
            #expect(har.contains(plainValue) && har.contains(pathSegment), "seed \(seed), round \(round): the plain fields stay in the HAR")
            #expect(logs.text.contains(pathSegment) && request.curlDescription.contains(plainValue), "seed \(seed), round \(round)")
        }
    }

    @Test("every OAuth flow: no secret of a token request or answer reaches a surface", arguments: TransportKind.allCases)
    func oauthFlows(kind: TransportKind) async throws {
        let base = try await TestServer.running().baseURL
        let tracer = InMemoryTracer()
        let logs = CapturedLogs()
        let recorder = HARRecorder()
        let chain = TracingMiddleware(tracer: tracer) --> LogMiddleware(logger: logs.logger(level: .debug), logsCurlCommands: true) --> recorder --> kind.make()
        let tag = "t" + UUID().uuidString.prefix(8).lowercased()
        let serviceSecret = "catena-service-secret"
        var secrets = [serviceSecret]
        var errors: [String] = []
        func keep(_ token: BearerToken) {
            secrets.append(token.accessToken)
            if let refresh = token.refreshToken { secrets.append(refresh) }
        }

        for authentication in [OAuth2Client.Authentication.clientSecretBasic(serviceSecret), .clientSecretPost(serviceSecret)] {
            let service = try await OAuth2Client.discover(issuer: base, clientID: "catena-service.\(tag)", authentication: authentication, loader: chain)
            keep(try await service.clientCredentials(scopes: ["read"]))
        }
        let cli = try await OAuth2Client.discover(issuer: base, clientID: "catena-cli.\(tag)", loader: chain, clock: VirtualClock())
        let device = try await cli.authorizeDevice()
        secrets += [device.deviceCode, device.userCode]
        let signedIn = try await cli.token(for: device)
        keep(signedIn)
        let refreshed = try await cli.refresh(signedIn)
        keep(refreshed)
        do {
            _ = try await cli.refresh(signedIn)  // reused: the server refuses, and revokes the family
        } catch {
            errors.append(error.description)
        }

        let authorization = try cli.authorizationRequest(redirectURI: URL(string: "http://127.0.0.1:9/callback")!)
        var authorize = APIRequest(url: authorization.url)
        authorize[option: RedirectPolicy.self] = .never
        let redirect = try #require(try await chain.load(authorize).headerFields[.location].flatMap(URL.init(string:)))
        secrets += [
            try #require(URLComponents(url: redirect, resolvingAgainstBaseURL: false)?.queryItems?.first { $0.name == "code" }?.value),
            authorization.codeVerifier,
        ]
        let exchanged = try await cli.exchange(redirect, for: authorization)
        keep(exchanged)
        do {
            _ = try await cli.exchange(redirect, for: authorization)  // a replayed code
        } catch {
            errors.append(error.description)
        }
        try await cli.revoke(exchanged)
        #expect(errors.count == 2, "the reuse and the replay were refused")

        let surfaces: [(String, String)] = [
            ("HAR", String(decoding: try recorder.har.encoded(), as: UTF8.self)),
            ("log", logs.text),
            ("trace", tracer.finishedSpans.map { "\($0.operationName) \($0.attributes)" }.joined(separator: "\n")),
            ("error", errors.joined(separator: "\n")),
            ("token", [signedIn, refreshed, exchanged].map { "\($0) \(String(reflecting: $0))" }.joined()),
        ]
        #expect(surfaces[0].1.contains("/oauth/token") && surfaces[1].1.contains("/oauth/revoke"), "the surfaces did record the flows")
        for (surface, text) in surfaces {
            for secret in secrets {
                #expect(!text.contains(secret), "\(secret) in the \(surface)")
            }
        }
    }
}
