@testable import Catena
import CatenaTesting
import Foundation
import HTTPTypes
import Testing
import CatenaDemoServer

@Suite("curl descriptions")
struct CurlDescriptionTests {
    @Test("method, URL, headers and body; secrets redacted unless asked; quotes survive")
    func shape() throws {
        var request = try APIRequest(
            .post, urlString: "https://api.example.com/v1/items?api_key=s3cret&q=it's",
            body: .json(["name": "O'Brien"]))
        request.headerFields[.authorization] = "Bearer abc"
        request.headerFields[HTTPField.Name("X-Trace")!] = "a'b"
        let text = request.curlDescription
        #expect(text.hasPrefix("curl -X 'POST' 'https://api.example.com/v1/items?api_key=<redacted>&q="))
        #expect(text.contains(#"-H 'Authorization: <redacted>'"#))
        #expect(text.contains(#"-H 'X-Trace: a'\''b'"#))
        #expect(text.contains(#"-H 'Content-Type: application/json'"#))
        #expect(text.contains(#"--data-raw '{"name":"O'\''Brien"}'"#))
        #expect(!text.contains("abc") && !text.contains("s3cret"))
        let open = request.curlDescription(redacting: nil)
        #expect(open.contains("Bearer abc") && open.contains("api_key=s3cret"))
    }

    @Test("HEAD, binary bodies left out unless unredacted (then through base64), streams named and not read, --compressed when asked")
    func kinds() throws {
        #expect(try APIRequest(.head, urlString: "http://127.0.0.1/x").curlDescription == "curl --head 'http://127.0.0.1/x'")
        let binary = try APIRequest(.put, urlString: "http://127.0.0.1/x", body: .data(Data([0, 1, 2, 255])))
        #expect(binary.curlDescription.hasPrefix("# body not shown: 4 bytes that are not UTF-8 text, which cannot be read for secrets\ncurl -X 'PUT'"))
        #expect(!binary.curlDescription.contains("--data"))
        let open = binary.curlDescription(redacting: nil)
        #expect(open.hasPrefix("printf %s 'AAEC/w==' | base64 -d | curl -X 'PUT'"))
        #expect(open.hasSuffix("--data-binary @-"))
        let streamed = try APIRequest(.post, urlString: "http://127.0.0.1/x", body: .stream(length: nil) { AsyncThrowingStream { nil } })
        #expect(streamed.curlDescription.hasPrefix("# body (stream) not shown\ncurl -X 'POST'"))
        var compressed = try APIRequest(.get, urlString: "http://127.0.0.1/x")
        compressed.headerFields[.acceptEncoding] = "gzip, deflate"
        #expect(compressed.curlDescription.hasSuffix("--compressed"))
    }

    @Test("nothing reaches curl in a form it interprets: @ and < bodies, globs, empty headers, GET with a body")
    func nothingCurlInterprets() throws {
        for text in ["@/etc/hostname", "<file", "-X DELETE", "@-"] {
            let request = try APIRequest(.post, urlString: "http://127.0.0.1/x", body: .text(text))
            #expect(request.curlDescription.hasSuffix("--data-raw " + APIRequest.shellQuoted(text)))
            #expect(!request.curlDescription.contains("--data-binary"))
        }
        // Brackets and braces are curl's URL globs (whether they survive URL parsing
        // depends on Foundation; where they do, curl must be told not to expand them).
        let globbed = try APIRequest(.get, urlString: "http://127.0.0.1/x?a[0]={b}").curlDescription
        #expect(!globbed.contains("[") || globbed.hasPrefix("curl --globoff "), "\(globbed)")
        var empty = try APIRequest(.get, urlString: "http://127.0.0.1/x")
        empty.headerFields[HTTPField.Name("X-Empty")!] = ""
        #expect(empty.curlDescription.contains("-H 'X-Empty;'"))
        let getWithBody = try APIRequest(.get, urlString: "http://127.0.0.1/x", body: .text("q"))
        #expect(getWithBody.curlDescription.hasPrefix("curl -X 'GET' "))
        // A URL that is not http(s) could be read as an option (-K reads a config file)
        // or fetch a local file: curl is told it is the URL and may use http(s) only.
        for text in ["-K/tmp/x", "file:///etc/passwd"] {
            let request = APIRequest(.get, url: URL(string: text)!)
            #expect(request.curlDescription.hasPrefix("curl --proto '=http,https' --url '"), "\(request.curlDescription)")
        }
    }

    @Test("a form body's secret members are redacted like query items; printed when asked")
    func formSecrets() throws {
        let form = "grant_type=password&username=ann&password=hunter2&refresh_token=r1"
        var request = try APIRequest(.post, urlString: "http://127.0.0.1/token", body: .text(form))
        request.headerFields[.contentType] = "application/x-www-form-urlencoded"
        let description = request.curlDescription
        #expect(!description.contains("hunter2") && !description.contains("r1'"), "\(description)")
        #expect(description.contains("username=ann&password=<redacted>"))
        #expect(request.curlDescription(redacting: nil).contains("password=hunter2"))
    }

    @Test("a JSON body's secret members are redacted in place, every other byte kept; a body that cannot be read is not shown")
    func jsonSecrets() throws {
        let json = "{\n  \"username\": \"ann\",\n  \"password\": \"hunter2\",\n  \"nested\": {\"Refresh_Token\": \"r1\", \"x-api-key\": [\"k9\"]}\n}"
        var request = try APIRequest(.post, urlString: "http://127.0.0.1/token", body: .text(json, contentType: "application/json"))
        let description = request.curlDescription
        for secret in ["hunter2", "r1", "k9"] { #expect(!description.contains(secret), "\(secret) in \(description)") }
        let redacted =
            "{\n  \"username\": \"ann\",\n  \"password\": \"<redacted>\",\n  \"nested\": {\"Refresh_Token\": \"<redacted>\", \"x-api-key\": [\"<redacted>\"]}\n}"
        #expect(description.hasSuffix("--data-raw " + APIRequest.shellQuoted(redacted)), "\(description)")
        #expect(request.curlDescription(redacting: nil).contains("hunter2"))
        // Cut short, the document could hide a secret past where the scanner stopped.
        request.body = .text(String(json.dropLast(3)), contentType: "application/json")
        #expect(!request.curlDescription.contains("hunter2") && request.curlDescription.contains("could not be read"))
    }

    @Test("shell quoting: 300 random strings come back unchanged through sh")
    func quotingRoundTrips() throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
        let pieces = ["'", "\"", "$", "`", "\\", "\n", "!", "*", "$(id)", "${HOME}", " ", ";", "&&", "|", "é", "'\\''", "%s", "-n"]
        var inputs: [String] = []
        for _ in 0..<300 { inputs.append(randomHeaderText(&generator, pieces: pieces, maxPieces: 12)) }
        // One shell for all: each string printed between separators.
        let script = inputs.map { "printf '%s\\036' " + APIRequest.shellQuoted($0) }.joined(separator: "\n")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", script]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "seed \(seed)")
        let outputs = String(decoding: output, as: UTF8.self).split(separator: "\u{1E}", omittingEmptySubsequences: false).dropLast().map(String.init)
        #expect(outputs == inputs, "seed \(seed)")
    }
}
