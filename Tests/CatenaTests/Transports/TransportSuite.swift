import Catena
import CatenaAsyncHTTPClient
import CatenaDemoServer
import Foundation
import HTTPTypes
import Testing
@testable import CatenaTestSupport

/// One behaviour suite, run against every transport and the real demo server.
@Suite("Transports against the demo server")
struct TransportSuite {
    @Test("every method reaches the server as sent", arguments: TransportKind.withHTTPS)
    func methods(kind: TransportKind) async throws {
        let chain = try await kind.chain()
        for method: HTTPRequest.Method in [.get, .post, .put, .patch, .delete, .options] {
            let response = try await chain.load(try APIRequest(method, path: ["api", "echo"]))
            #expect(response.status == .ok)
            #expect(try response.decode(Echo.self).method == method.rawValue)
        }
        let head = try await chain.load(try APIRequest(.head, path: ["api", "echo"]))
        #expect(head.status == .ok)
        #expect(head.body.isEmpty)
    }

    @Test("header fields go out and come back", arguments: TransportKind.withHTTPS)
    func headers(kind: TransportKind) async throws {
        let chain = try await kind.chain()
        let request = try APIRequest(
            .get, path: ["api", "echo"],
            headerFields: [
                HTTPField.Name("X-Catena-Test")!: "one, two",
                .accept: "application/json",
            ])
        var withRepeats = request
        // A field given twice, and a name given in lower case (URLSession is handed the
        // fields as one dictionary: names capitalized, repeats joined with ",").
        withRepeats.headerFields.append(HTTPField(name: HTTPField.Name("x-repeated")!, value: "a"))
        withRepeats.headerFields.append(HTTPField(name: HTTPField.Name("X-Repeated")!, value: "b"))
        withRepeats.headerFields.append(HTTPField(name: HTTPField.Name("x-lower-case")!, value: "yes"))
        let response = try await chain.load(withRepeats)
        let echo = try response.decode(Echo.self)
        #expect(echo.header("x-repeated")?.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } == ["a", "b"])
        #expect(echo.header("x-lower-case") == "yes")
        #expect(echo.header("x-catena-test") == "one, two")
        #expect(echo.header("accept") == "application/json")
        #expect(response.headerFields[.contentType] == "application/json; charset=utf-8")
        #expect(response.headerFields[.server] == "catena-demo")
    }

    @Test("path components and query items arrive percent-encoded as built", arguments: TransportKind.withHTTPS)
    func pathAndQuery(kind: TransportKind) async throws {
        let chain = try await kind.chain()
        let request = try APIRequest(
            .get, path: ["api", "echo", "a b", "c/d"],
            query: [URLQueryItem(name: "q", value: "x+y&z"), URLQueryItem(name: "n", value: "1")])
        let echo = try await chain.load(request).decode(Echo.self)
        #expect(echo.path == "/api/echo/a%20b/c%2Fd")
        #expect(echo.query == "q=x%2By%26z&n=1")
    }

    @Test("JSON, form, multipart and text bodies arrive with their Content-Type", arguments: TransportKind.withHTTPS)
    func bodies(kind: TransportKind) async throws {
        let chain = try await kind.chain()
        struct Job: Codable, Sendable { let name: String; let job: String }

        let json = try await chain.load(try APIRequest(.post, path: ["api", "echo"], body: .json(Job(name: "neo", job: "the one"))))
            .decode(Echo.self)
        #expect(json.header("content-type") == "application/json")
        #expect(try JSONDecoder().decode(Job.self, from: Data(try #require(json.body).utf8)).job == "the one")

        let form = try await chain.load(try APIRequest(.put, path: ["api", "echo"], body: .form([(name: "a b", value: "c&d")])))
            .decode(Echo.self)
        #expect(form.header("content-type") == "application/x-www-form-urlencoded")
        #expect(form.body == "a+b=c%26d")

        var parts = MultipartForm(boundary: "catena-boundary")
        parts.append(.init(name: "file", filename: "hello.txt", contentType: "text/plain", data: Data("hello".utf8)))
        let multipart = try await chain.load(try APIRequest(.post, path: ["api", "echo"], body: .multipart(parts))).decode(Echo.self)
        #expect(multipart.header("content-type") == "multipart/form-data; boundary=catena-boundary")
        #expect(multipart.body?.contains("filename=\"hello.txt\"") == true)
        #expect(multipart.bodyLength == (try await APIRequest.Body.multipart(parts).makeData())?.count)

        let text = try await chain.load(try APIRequest(.patch, path: ["api", "echo"], body: .text("héllo ✓"))).decode(Echo.self)
        #expect(text.body == "héllo ✓")
        #expect(text.header("content-type") == "text/plain; charset=utf-8")
    }

    @Test("a Content-Type set on the request wins over the body's", arguments: TransportKind.withHTTPS)
    func explicitContentType(kind: TransportKind) async throws {
        let chain = try await kind.chain()
        let request = try APIRequest(
            .post, path: ["api", "echo"], headerFields: [.contentType: "application/vnd.catena+json"],
            body: .json(["a": 1]))
        let echo = try await chain.load(request).decode(Echo.self)
        #expect(echo.header("content-type") == "application/vnd.catena+json")
    }

    @Test("any status is a response, not an error", arguments: TransportKind.withHTTPS)
    func statusCodes(kind: TransportKind) async throws {
        let chain = try await kind.chain()
        for code in [200, 201, 204, 400, 404, 429, 500, 503] {
            let response = try await chain.load(try APIRequest(.get, path: ["api", "status", String(code)]))
            #expect(response.status.code == code)
            #expect(response.body.isEmpty == (code == 204))
        }
    }

    @Test("redirects are followed to the final response", arguments: TransportKind.withHTTPS)
    func redirects(kind: TransportKind) async throws {
        let chain = try await kind.chain()
        for status in ["301", "302", "307"] {
            let request = try APIRequest(
                .get, path: ["api", "redirect"],
                query: [
                    URLQueryItem(name: "to", value: "/api/users/2"), URLQueryItem(name: "status", value: status),
                ])
            let response = try await chain.load(request)
            #expect(response.status == .ok)
            #expect(try response.decode(SingleUserEnvelope.self).data.id == 2)
        }
    }

    @Test("a request slower than its timeout option fails with timedOut, long before the server answers", arguments: TransportKind.withHTTPS)
    func requestTimeout(kind: TransportKind) async throws {
        let chain = try await kind.chain()
        var request = try APIRequest(.get, path: ["api", "users", "1"], query: [URLQueryItem(name: "delay", value: "5")])
        request.timeout = .milliseconds(300)
        let start = ContinuousClock.now
        let error = await #expect(throws: CatenaError.self) { try await chain.load(request) }
        #expect(error?.code == .timedOut)
        #expect(ContinuousClock.now - start < .seconds(4))
    }

    @Test("the timeout is for the whole exchange: a body that trickles in past it times out", arguments: TransportKind.withHTTPS)
    func timeoutCoversBody(kind: TransportKind) async throws {
        let chain = try await kind.chain()
        // Headers at once, then one byte every 100 ms for 6 s: never idle, never done in time.
        var request = try APIRequest(
            .get, path: ["api", "drip"],
            query: [
                URLQueryItem(name: "chunks", value: "60"), URLQueryItem(name: "interval", value: String(Timing.stretch(0.1))),
            ])
        request.timeout = Timing.stretch(.milliseconds(500))
        let start = ContinuousClock.now
        let error = await #expect(throws: CatenaError.self) { try await chain.load(request) }
        #expect(error?.code == .timedOut)
        // Well before the drip's end. Not tighter: with the whole suite running on 2
        // cores, an HTTPS call once took 2.2 s to time out.
        #expect(ContinuousClock.now - start < Timing.stretch(.seconds(4)))
    }

    @Test("the transport's own timeout applies when the request sets none", arguments: TransportKind.withHTTPS)
    func transportTimeout(kind: TransportKind) async throws {
        let chain = try await kind.chain(timeout: .milliseconds(300))
        let request = try APIRequest(.get, path: ["api", "users", "1"], query: [URLQueryItem(name: "delay", value: "5")])
        let error = await #expect(throws: CatenaError.self) { try await chain.load(request) }
        #expect(error?.code == .timedOut)
    }

    @Test("a refused connection fails with cannotConnect and names the URL", arguments: TransportKind.withHTTPS)
    func connectionRefused(kind: TransportKind) async throws {
        let port = try await TestServer.closedPort()
        let request = try APIRequest(.get, urlString: "http://127.0.0.1:\(port)/api/users")
        let start = ContinuousClock.now
        let error = await #expect(throws: CatenaError.self) { try await kind.make().load(request) }
        #expect(error?.code == .cannotConnect)
        #expect(error?.description.contains("GET http://127.0.0.1:\(port)/api/users") == true)
        // Far below the 30 s timeout, with room for a loaded run (3 s was passed at 3.4 s in CI).
        #expect(ContinuousClock.now - start < Timing.stretch(.seconds(10)), "a refused connection must not wait for the 30 s timeout")
    }

    // The latency itself (goal: under 100 ms) is measured by the benchmark: under this
    // suite's parallel load it also measures the test's own rescheduling. Here: the
    // request is cancelled, not waited out (the server would take 5 s).
    @Test("cancelling the calling task mid-flight returns cancelled at once", arguments: TransportKind.withHTTPS)
    func cancellationMidFlight(kind: TransportKind) async throws {
        let chain = try await kind.chain()
        let request = try APIRequest(.get, path: ["api", "users", "1"], query: [URLQueryItem(name: "delay", value: String(Timing.stretch(5)))])
        let task = Task { try await chain.load(request) }
        try await Task.sleep(for: .milliseconds(300))
        let cancelledAt = ContinuousClock.now
        task.cancel()
        let result = await task.result
        let latency = ContinuousClock.now - cancelledAt
        #expect((result.failure as? CatenaError)?.code == .cancelled)
        #expect(latency < Timing.stretch(.seconds(2.5)), "cancellation took \(latency)")
    }

    @Test("a task cancelled before the request starts never sends it", arguments: TransportKind.withHTTPS)
    func cancelledBeforeStart(kind: TransportKind) async throws {
        let chain = try await kind.chain()
        let request = try APIRequest(.get, path: ["api", "users", "1"])
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await chain.load(request)
        }
        #expect(((await task.result).failure as? CatenaError)?.code == .cancelled)
    }

    @Test("large bodies go out and come back intact", arguments: TransportKind.withHTTPS)
    func largeBodies(kind: TransportKind) async throws {
        let chain = try await kind.chain()
        let size = 8 * 1024 * 1024
        let download = try await chain.load(try APIRequest(.get, path: ["api", "bytes", String(size)]))
        #expect(download.body.count == size)
        #expect(download.body == patternData(size))

        let upload = randomData(5 * 1024 * 1024)
        let echoed = try await chain.load(try APIRequest(.post, path: ["api", "echo-raw"], body: .data(upload)))
        #expect(echoed.body == upload)
    }

    @Test("a body larger than MaximumResponseSize is refused as invalidResponse", arguments: TransportKind.withHTTPS)
    func responseSizeLimit(kind: TransportKind) async throws {
        let chain = try await kind.chain()
        var request = try APIRequest(.get, path: ["api", "bytes", String(2 * 1024 * 1024)])
        request[option: MaximumResponseSize.self] = 1024 * 1024
        let error = await #expect(throws: CatenaError.self) { try await chain.load(request) }
        #expect(error?.code == .invalidResponse)
        #expect(error?.detail?.contains("MaximumResponseSize") == true)
    }

    @Test("bad input never reaches the network: relative request, unencodable body", arguments: TransportKind.withHTTPS)
    func badInput(kind: TransportKind) async throws {
        let transport = kind.make()
        let relative = await #expect(throws: CatenaError.self) { try await transport.load(try APIRequest(.get, path: ["api", "users"])) }
        #expect(relative?.code == .invalidRequest)
        #expect(relative?.detail?.contains("no host") == true)

        let chain = try await kind.chain()
        let unencodable = await #expect(throws: CatenaError.self) {
            try await chain.load(try APIRequest(.post, path: ["api", "users"], body: .json(["n": Double.infinity])))
        }
        #expect(unencodable?.code == .invalidRequest)
        #expect(unencodable?.description.contains("JSON") == true)
    }
}

struct SingleUserEnvelope: Decodable {
    struct User: Decodable { let id: Int }
    let data: User
}

@Suite("Encodable queries and forms against the demo server")
struct EncodableFormTests {
    struct Filter: Encodable, Sendable {
        struct Range: Encodable, Sendable { let from: Int; let to: Int }
        let name: String
        let ids: [Int]
        let range: Range
        let note: String?
    }

    @Test("a query and a form body from one Encodable arrive as the server reads them", arguments: TransportKind.allCases)
    func encodable(kind: TransportKind) async throws {
        let chain = try await kind.chain()
        let filter = Filter(name: "a&b=c d+e", ids: [1, 2], range: .init(from: 3, to: 4), note: nil)
        let query = try await chain.load(try APIRequest(.get, path: ["api", "echo"], query: filter))
        let echoedQuery = try JSONDecoder().decode(Echo.self, from: query.body).query
        var components = URLComponents()
        components.percentEncodedQuery = echoedQuery
        let items = (components.queryItems ?? []).map { "\($0.name)=\($0.value ?? "")" }
        #expect(items == ["name=a&b=c d+e", "ids[]=1", "ids[]=2", "range[from]=3", "range[to]=4"], "\(echoedQuery)")

        let form = try await chain.load(try APIRequest(.post, path: ["api", "echo"], body: .form(filter)))
        let echoed = try JSONDecoder().decode(Echo.self, from: form.body)
        #expect(echoed.header("Content-Type") == "application/x-www-form-urlencoded")
        #expect(echoed.body == "name=a%26b%3Dc+d%2Be&ids%5B%5D=1&ids%5B%5D=2&range%5Bfrom%5D=3&range%5Bto%5D=4")
    }
}
