@testable import Catena
import CatenaTesting
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTypes
import Testing
import CatenaDemoServer

/// Random text: printable ASCII, the separators HTTP parsers split on, digits, and a
/// few scalars outside ASCII.
func randomHeaderText(_ generator: inout some RandomNumberGenerator, pieces: [String], maxPieces: Int = 10) -> String {
    (0..<Int.random(in: 0...maxPieces, using: &generator)).map { _ in
        Bool.random(using: &generator)
            ? pieces.randomElement(using: &generator)!
            : String(UnicodeScalar(UInt8.random(in: 0x20...0x7E, using: &generator)))
    }.joined()
}

/// Cuts, repeats or replaces one random piece of `text`.
func mutate(_ text: String, _ generator: inout some RandomNumberGenerator) -> String {
    var scalars = Array(text.unicodeScalars)
    guard !scalars.isEmpty else { return "x" }
    let index = Int.random(in: 0..<scalars.count, using: &generator)
    switch Int.random(in: 0..<4, using: &generator) {
    case 0: scalars.remove(at: index)
    case 1: scalars.insert(scalars[index], at: index)
    case 2: scalars[index] = UnicodeScalar(UInt8.random(in: 0x20...0x7E, using: &generator))
    default: scalars = Array(scalars[..<index])
    }
    var view = String.UnicodeScalarView()
    view.append(contentsOf: scalars)
    return String(view)
}

@Suite("Header parsers under hostile input")
struct HeaderParsingFuzzTests {
    static let datePieces = [
        "Sun", "Sunday", ",", " ", "  ", "06", "6", "Nov", "-", "1994", "94", "08:49:37", ":", "GMT", "UTC",
        "99", "00", "60", "31", "Feb", "29", "2024", "1900", "0000", "9999", "\t", "é", "\u{0}",
    ]

    private static func formatter(_ format: String) -> DateFormatter {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = format
        return formatter
    }

    @Test("HTTP dates: random and mutated text never traps; whatever parses lies in years 1...9999")
    func datesNeverTrap() {
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
        let valid = ["Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"]
        for round in 0..<20_000 {
            let text =
                round % 2 == 0
                ? randomHeaderText(&generator, pieces: Self.datePieces)
                : mutate(valid.randomElement(using: &generator)!, &generator)
            if let date = HTTPDate.parse(text) {
                #expect((-62_135_596_800...253_402_300_800).contains(date.timeIntervalSince1970), "seed \(seed): \(text)")
            }
            _ = RetryMiddleware.parseRetryAfter(text, now: Date())
        }
    }

    @Test("HTTP dates: a formatted date parses back to itself, from year 1 to 9999")
    func datesRoundTrip() {
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
        #expect(HTTPDate.format(Date(timeIntervalSince1970: .nan)) == "Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(HTTPDate.format(Date(timeIntervalSince1970: .infinity)) == "Fri, 31 Dec 9999 23:59:59 GMT")
        for _ in 0..<20_000 {
            let seconds = Double(Int64.random(in: -62_135_596_800...253_402_300_799, using: &generator))
            let date = Date(timeIntervalSince1970: seconds)
            let text = HTTPDate.format(date)
            #expect(HTTPDate.parse(text) == date, "seed \(seed): \(text)")
        }
    }

    @Test("HTTP dates: all three forms agree with DateFormatter on random dates since 1970")
    func datesAgreeWithFoundation() {
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
        let imf = Self.formatter("EEE, dd MMM yyyy HH:mm:ss 'GMT'")
        let asctime = Self.formatter("EEE MMM d HH:mm:ss yyyy")
        let rfc850 = Self.formatter("EEEE, dd-MMM-yy HH:mm:ss 'GMT'")
        // This year in UTC, as HTTPDate reads a two-digit year: in a zone behind UTC, the
        // local year is the last one for some hours after midnight UTC on 1 January.
        let thisYear = Calendar(identifier: .gregorian).dateComponents(in: TimeZone(identifier: "GMT")!, from: Date()).year!
        for _ in 0..<500 {
            let date = Date(timeIntervalSince1970: Double(Int64.random(in: 0...4_102_444_800, using: &generator)))
            #expect(HTTPDate.format(date) == imf.string(from: date), "seed \(seed)")
            #expect(HTTPDate.parse(imf.string(from: date)) == date, "seed \(seed): \(imf.string(from: date))")
            var text = asctime.string(from: date)
            // asctime pads a one-digit day with a space: "Nov  6".
            if let range = text.range(of: #" \d "#, options: .regularExpression) { text.replaceSubrange(range, with: " " + text[range]) }
            #expect(HTTPDate.parse(text) == date, "seed \(seed): \(text)")
            let year = Calendar(identifier: .gregorian).dateComponents(in: TimeZone(identifier: "GMT")!, from: date).year!
            if abs(year - thisYear) < 50 {
                #expect(HTTPDate.parse(rfc850.string(from: date)) == date, "seed \(seed): \(rfc850.string(from: date))")
            }
        }
    }

    @Test(
        "HTTP dates: impossible fields are refused",
        arguments: [
            "Sun, 31 Feb 1994 08:49:37 GMT", "Sun, 29 Feb 1900 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 06 Nov 1994 08:60:00 GMT", "Sun, 00 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 0000 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 06 Nov 1994 08:49:37 GMT trailing", "Sun, 6 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37", "Foo, 06 Nov 1994 08:49:37 GMT", "Sun Nov 6 08:49:37 1994", "", " ",
        ])
    func datesRefused(text: String) {
        #expect(HTTPDate.parse(text) == nil)
    }

    @Test("HTTP dates: a leap day and a leap second are read")
    func leapDates() {
        #expect(HTTPDate.parse("Thu, 29 Feb 2024 00:00:00 GMT") == Date(timeIntervalSince1970: 1_709_164_800))
        #expect(HTTPDate.parse("Sat, 31 Dec 2016 23:59:60 GMT") == Date(timeIntervalSince1970: 1_483_228_799))
    }

    @Test(
        "Retry-After: delay-seconds and dates give a wait that is never negative; nonsense gives none",
        arguments: [
            ("120", 120.0), ("0", 0), (" 7 ", 7), ("-1", nil), ("1e3", nil), ("99999999999999999999999", nil), ("inf", nil),
            ("Sun, 06 Nov 1994 08:49:37 GMT", 0), ("Fri, 31 Dec 9999 23:59:59 GMT", 253_402_300_799 - 1_800_000_000),
        ] as [(String, Double?)])
    func retryAfter(value: String, seconds: Double?) {
        let wait = RetryMiddleware.parseRetryAfter(value, now: Date(timeIntervalSince1970: 1_800_000_000))
        #expect(wait.map { Double($0.components.seconds) } == seconds)
    }

    static let mediaPieces = [
        "application", "json", "text", "/", ";", "=", "\"", "\\", " ", "charset", "utf-8", "UTF-16LE", "q=0.5",
        "boundary", ",", "*", "\t", "é", "()", "x-", "+json",
    ]

    @Test("Content-Type: random and mutated values never trap; what parses has a type, a subtype and lowercase names")
    func mediaTypesNeverTrap() {
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
        let valid = ["application/json; charset=utf-8", "text/plain;charset=\"iso-8859-1\"", "multipart/form-data; boundary=\"a\\\"b\""]
        for round in 0..<20_000 {
            let text =
                round % 2 == 0
                ? randomHeaderText(&generator, pieces: Self.mediaPieces)
                : mutate(valid.randomElement(using: &generator)!, &generator)
            guard let type = MediaType(text) else { continue }
            let parts = type.essence.split(separator: "/", omittingEmptySubsequences: false)
            #expect(parts.count == 2 && !parts[0].isEmpty && !parts[1].isEmpty, "seed \(seed): \(text)")
            #expect(type.essence == type.essence.lowercased() && type.parameters.keys.allSatisfy { $0 == $0.lowercased() }, "seed \(seed): \(text)")
        }
    }

    @Test("Content-Type: a well-formed value round-trips, quoted or not")
    func mediaTypesRoundTrip() {
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
        let tokens = ["text", "plain", "application", "vnd.api+json", "x-custom", "charset", "boundary", "utf-8", "a1", "Q"]
        for _ in 0..<2_000 {
            let essence = "\(tokens.randomElement(using: &generator)!)/\(tokens.randomElement(using: &generator)!)"
            var parameters: [String: String] = [:]
            var text = essence
            for _ in 0..<Int.random(in: 0...3, using: &generator) {
                let name = tokens.randomElement(using: &generator)!.lowercased()
                let value = randomHeaderText(&generator, pieces: ["a", "b c", "\"", "\\", ";", "=", "é"], maxPieces: 4)
                let quoted = "\"" + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
                text += Bool.random(using: &generator) ? "; " : ";"
                text += "\(name)=\(quoted)"
                if parameters[name] == nil { parameters[name] = value }
            }
            let parsed = MediaType(text)
            #expect(parsed?.essence == essence.lowercased(), "seed \(seed): \(text)")
            #expect(parsed?.parameters == parameters, "seed \(seed): \(text)")
        }
    }

    @Test(
        "Content-Type: examples",
        arguments: [
            ("application/json", "application/json", nil), ("Application/JSON; Charset=\"UTF-8\"", "application/json", "utf-8"),
            ("text/plain;", "text/plain", nil), ("text/plain;;charset=latin1", "text/plain", "latin1"),
            ("json", nil, nil), ("/json", nil, nil), ("text/", nil, nil), ("text/plain; charset", "text/plain", nil),
            ("text/plain; charset=\"utf-8", "text/plain", nil), ("text/plain, application/json", "text/plain", nil),
            ("application/json; charset = utf-8", "application/json", nil), ("text/plain; a=1; b; charset=utf-8", "text/plain", nil),
        ] as [(String, String?, String?)])
    func mediaTypeExamples(text: String, essence: String?, charset: String?) {
        let type = MediaType(text)
        #expect(type?.essence == essence)
        #expect(type?.charset == charset)
    }

    static let locationPieces = [
        "http://", "https://", "ftp://", "javascript:", "//", "/", "..", ".", "?", "#", "@", ":", "%", "%2F",
        "[", "]", "::1", "127.0.0.1", "example.com", "user:pass@", " ", "\\", "é", "65536", "0",
    ]

    @Test("Location: an empty IPv6 literal is no host (found by the fuzz test below)")
    func emptyBracketHost() throws {
        let request = try APIRequest(.get, urlString: "https://api.example.com/a")
        let response = APIResponse(status: .found, headerFields: [.location: "https://[]"], body: Data(), request: request)
        #expect(try Redirects.nextRequest(after: response, from: request) == nil)
        #expect(APIRequest(url: URL(string: "https://[]/x")!).host == nil)
    }

    @Test("Location: random redirect targets never trap; a followed one is http(s) with a host and no user info")
    func locations() throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
        let request = try APIRequest(.post, urlString: "https://api.example.com/a/b?c=d", body: .data(Data("x".utf8), contentType: "text/plain"))
        for _ in 0..<5_000 {
            let location = randomHeaderText(&generator, pieces: Self.locationPieces)
            var fields = HTTPFields()
            fields[.location] = location
            guard fields[.location] != nil else { continue }
            let status = [301, 302, 303, 307, 308].randomElement(using: &generator)!
            let response = APIResponse(status: .init(code: status), headerFields: fields, body: Data(), request: request)
            guard let next = try? Redirects.nextRequest(after: response, from: request) else { continue }
            #expect(next.scheme == "http" || next.scheme == "https", "seed \(seed): \(location)")
            #expect(next.host?.isEmpty == false, "seed \(seed): \(location)")
            let url = try? next.url()
            #expect(url.map { $0.user == nil && $0.password == nil } ?? true, "seed \(seed): \(location)")
        }
    }
}

@Suite("Request field names as URLSession is given them")
struct CapitalizedNameTests {
    @Test("random token names are capitalized exactly as Foundation's String.capitalized does", arguments: 0..<3)
    func randomNames(round: Int) throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
        let characters = Array("abcxyzABCXYZ0189!#$%&'*+-.^_`|~")
        for _ in 0..<2_000 {
            let text = String((0..<(1 + Int(generator.next() % 12))).map { _ in characters[Int(generator.next() % UInt64(characters.count))] })
            let name = try #require(HTTPField.Name(text), "seed \(seed): \(text)")
            #expect(URLSessionTransport.capitalized(name) == text.capitalized, "seed \(seed): \(text)")
        }
        #expect(URLSessionTransport.capitalized(.authorization) == "Authorization")
        #expect(URLSessionTransport.capitalized(HTTPField.Name("x-api-key")!) == "X-Api-Key")
    }
}

@Suite("Length and range parsers under hostile input")
struct LengthParsingFuzzTests {
    static let lengthPieces = [
        "0", "1", "5", "9", "10", "+", "-", " ", ",", "\t", "0x", "e", ".", "99999999999999999999", "9223372036854775807",
        "9223372036854775808", "nan", "inf", "٣", "½",
    ]

    private static func response(contentLength: String, encoding: String? = nil) -> HTTPURLResponse? {
        var fields = ["Content-Length": contentLength]
        if let encoding { fields["Content-Encoding"] = encoding }
        return HTTPURLResponse(url: URL(string: "http://127.0.0.1/")!, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: fields)
    }

    @Test("Content-Length: random values never trap; an accepted one is one run of ASCII digits within the limit")
    func contentLengths() throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
        let request = try APIRequest(.get, urlString: "http://127.0.0.1/")
        let limit = 1_000
        for _ in 0..<3_000 {
            let text = randomHeaderText(&generator, pieces: Self.lengthPieces, maxPieces: 5)
            guard let response = Self.response(contentLength: text) else { continue }
            let outcome = Result { () throws(CatenaError) in try URLSessionCall.checkFraming(response, limit: limit, request: request) }
            switch outcome {
            case .success:
                let pieces = Set(text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
                #expect(pieces.count == 1, "seed \(seed): \(text)")
                let piece = try #require(pieces.first, "seed \(seed): \(text)")
                #expect(piece.utf8.allSatisfy { (0x30...0x39).contains($0) }, "seed \(seed): \(text)")
                #expect((Int(piece) ?? .max) <= limit, "seed \(seed): \(text)")
            case .failure(let error):
                #expect(error.code == .invalidResponse, "seed \(seed): \(text)")
            }
            // The byte-level parser against the rule spelled out slowly: list elements
            // split on ",", empty ones skipped, spaces and tabs trimmed, all one run of
            // ASCII digits that fits an Int64, all the same.
            let elements = Set(text.split(separator: ",").map { String($0).trimmingSpacesAndTabs })
            let expected =
                elements.count == 1 && elements.first.map { !$0.isEmpty && $0.utf8.allSatisfy { (0x30...0x39).contains($0) } } == true
                ? Int64(elements.first!) : nil
            #expect(URLSessionCall.onlyLength(text) == expected, "seed \(seed): \(text)")
        }
    }

    @Test(
        "Content-Length: a well-formed length passes, repeated or not; a sign, a second length or an encoded body's size is judged right",
        arguments: [
            ("10", true), ("10, 10", true), ("1000", true), ("1001", false), ("+10", false), ("-0", false), ("10, 3", false),
            ("1e3", false), ("٣", false),
        ])
    func contentLengthExamples(text: String, accepted: Bool) throws {
        let request = try APIRequest(.get, urlString: "http://127.0.0.1/")
        let response = try #require(Self.response(contentLength: text))
        let passed = (try? URLSessionCall.checkFraming(response, limit: 1_000, request: request)) != nil
        #expect(passed == accepted, "\(text)")
        // A compressed body's declared size is not its decoded size, so the limit waits for the bytes.
        let encoded = try #require(Self.response(contentLength: "5000", encoding: "gzip"))
        #expect((try? URLSessionCall.checkFraming(encoded, limit: 1_000, request: request)) != nil)
        // `identity`, however spaced or cased, is no coding: the declared size is the body's.
        for identity in ["identity", "identity ", "IDENTITY", " identity,"] {
            let plain = try #require(Self.response(contentLength: "5000", encoding: identity))
            #expect((try? URLSessionCall.checkFraming(plain, limit: 1_000, request: request)) == nil, "\(identity)")
        }
    }

    @Test("Content-Range: random values never trap; an accepted range is ordered and inside its total")
    func contentRanges() {
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
        let pieces = ["bytes ", "bytes", "items ", "0", "1", "9", "10", "-", "/", "*", " ", ",", "+", "99999999999999999999", "٣"]
        for _ in 0..<5_000 {
            let text = randomHeaderText(&generator, pieces: pieces, maxPieces: 8)
            guard let range = ResumableFile.contentRange(text) else { continue }
            #expect(text.hasPrefix("bytes "), "seed \(seed): \(text)")
            #expect(range.start >= 0, "seed \(seed): \(text)")
            if let total = range.total { #expect(range.start < total, "seed \(seed): \(text)") }
        }
    }

    @Test("Content-Range: a well-formed range round-trips")
    func contentRangeRoundTrip() {
        var generator = SplitMix64(seed: UInt64.random(in: 0...UInt64.max))
        for _ in 0..<1_000 {
            let total = Int64.random(in: 1...Int64.max, using: &generator)
            let first = Int64.random(in: 0..<total, using: &generator)
            let last = Int64.random(in: first..<total, using: &generator)
            let known = ResumableFile.contentRange("bytes \(first)-\(last)/\(total)")
            #expect(known?.start == first && known?.total == total)
            let unknown = ResumableFile.contentRange("bytes \(first)-\(last)/*")
            #expect(unknown?.start == first && unknown?.total == nil)
        }
    }
}

extension String {
    fileprivate var trimmingSpacesAndTabs: String {
        var text = Substring(self)
        while let first = text.first, first == " " || first == "\t" { text.removeFirst() }
        while let last = text.last, last == " " || last == "\t" { text.removeLast() }
        return String(text)
    }
}
