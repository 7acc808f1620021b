import Foundation
import HTTPTypes
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// How a URLSession response's head is read and checked before its body: the header
// fields as the server sent them, and the framing rules both transports apply.

extension URLSessionTransport {
    /// The values of the fields that decide how a body is framed and coded, as the server
    /// sent them: `HTTPFields` makes a value legal (a control byte becomes a space, and
    /// leading and trailing ones go), which would let "gzip\u{1}" pass for gzip.
    struct Framing {
        var contentLength: String?
        var contentEncoding: String?
        var transferEncoding: String?

        /// Keeps `value` when `name` is one of the three (compared without case; repeated
        /// ones joined with ", ", as corelibs joins repeated fields).
        mutating func note(_ name: String, _ value: String) {
            func join(_ old: String?) -> String { old.map { $0 + ", " + value } ?? value }
            switch name.utf8.count {
            case 14 where name.equalsIgnoringASCIICase("content-length"): contentLength = join(contentLength)
            case 16 where name.equalsIgnoringASCIICase("content-encoding"): contentEncoding = join(contentEncoding)
            case 17 where name.equalsIgnoringASCIICase("transfer-encoding"): transferEncoding = join(transferEncoding)
            default: break
            }
        }
    }

    /// The response's header fields, and in `framing` the raw values of those that frame
    /// its body.
    static func fields(of response: HTTPURLResponse, framing: inout Framing) -> HTTPFields {
        var fields = HTTPFields()
        for (name, value) in response.allHeaderFields {
            guard let text = name as? String, let value = value as? String else { continue }
            framing.note(text, value)
            guard let name = HTTPField.Name(text) else { continue }
            if name == .setCookie {
                // URLSession joins repeated fields with ", ": Set-Cookie is the one field
                // whose values cannot be joined (RFC 9110, section 5.3), so split it again.
                for cookie in splitJoinedSetCookie(value) { fields.append(HTTPField(name: name, value: cookie)) }
            } else {
                fields.append(HTTPField(name: name, value: value))
            }
        }
        return fields
    }

    /// The Set-Cookie values in `joined`: URLSession joins repeated fields with ", ", so
    /// a comma and a space separate two when a cookie name and "=" follow. The comma of
    /// an Expires date ("Wed, 21 Oct 2026 …") stays, and so does a comma inside a value
    /// ("prefs=a,b=c; Secure" keeps its attributes).
    static func splitJoinedSetCookie(_ joined: String) -> [String] {
        var values: [String] = []
        var current = Substring(joined)
        var searchFrom = current.startIndex
        while let comma = current[searchFrom...].firstIndex(of: ",") {
            let afterComma = current[current.index(after: comma)...]
            let rest = afterComma.drop { $0 == " " || $0 == "\t" }
            let token = rest.prefix { $0 != "=" && $0 != ";" && $0 != "," && $0 != " " && $0 != "\t" }
            if afterComma.first == " ", !token.isEmpty, rest.dropFirst(token.count).first == "=" {
                values.append(String(current[..<comma]))
                current = rest
                searchFrom = current.startIndex
            } else {
                searchFrom = current.index(after: comma)
            }
        }
        values.append(String(current))
        return values.filter { !$0.trimmingCharacters(in: .whitespaces).isEmpty }
    }
}

extension URLSessionCall {
    /// A length the body cannot have, or two that disagree, is a framing error
    /// (RFC 9112, section 6.3); a declared length over the limit fails before the body.
    /// A body in a coding Catena does not decode fails here too, before libcurl (which
    /// corelibs always lets decode what it can) reads a byte of it.
    static func checkFraming(_ response: HTTPURLResponse, limit: Int, request: APIRequest) throws(CatenaError) {
        var framing = URLSessionTransport.Framing()
        _ = URLSessionTransport.fields(of: response, framing: &framing)
        try checkFraming(framing, status: response.statusCode, limit: limit, request: request)
    }

    /// ``checkFraming(_:limit:request:)`` on the values of a response's framing fields,
    /// read once (corelibs joins a repeated field's values with ", ", as one field).
    static func checkFraming(_ framing: URLSessionTransport.Framing, status: Int, limit: Int, request: APIRequest) throws(CatenaError) {
        let coding = framing.contentEncoding
        // libcurl decodes every member it knows, `identity` as nothing; of those, Catena
        // takes a single gzip or deflate as decoded, as on AsyncHTTPClient.
        if let coding {
            try ContentCoding.check(contentEncoding: [coding], status: status, request: request) {
                let codings = $0.filter { $0 != "identity" }
                return codings == ["gzip"] || codings == ["deflate"]
            }
        }
        guard let declared = framing.contentLength else { return }
        // Both framings at once may be an attempt at response splitting (RFC 9112, section
        // 6.3), refused as NIO's parser refuses it on AsyncHTTPClient.
        guard framing.transferEncoding == nil else {
            throw CatenaError(
                .invalidResponse, request: request, detail: "the response has both a Content-Length and a Transfer-Encoding")
        }
        guard let length = onlyLength(declared) else {
            throw CatenaError(
                .invalidResponse, request: request,
                detail: "the response's Content-Length \"\(declared.prefix(64))\" is not one length")
        }
        // As the coding check reads it: members trimmed, `identity` no coding.
        let encoded = coding.map { !ContentCoding.codings([$0]).isEmpty } ?? false
        if !encoded, length > Int64(limit) {
            throw CatenaError(
                .invalidResponse, request: request,
                detail: "the body has \(length) bytes, more than the \(limit) allowed (MaximumResponseSize)")
        }
    }

    /// The one length a Content-Length value states: runs of ASCII digits separated by
    /// commas (corelibs joins repeated fields that way; empty list elements are skipped,
    /// RFC 9110, section 5.6.1), each with optional spaces or tabs around it, all the
    /// same text. `nil` for anything else, or a length beyond `Int64`.
    static func onlyLength(_ value: String) -> Int64? {
        var length: Int64?
        var first: ArraySlice<UInt8>?
        for piece in value.utf8.split(separator: UInt8(ascii: ",")) {
            var digits = piece[...]
            while let first = digits.first, first == UInt8(ascii: " ") || first == UInt8(ascii: "\t") { digits.removeFirst() }
            while let last = digits.last, last == UInt8(ascii: " ") || last == UInt8(ascii: "\t") { digits.removeLast() }
            guard !digits.isEmpty else { return nil }
            var number: Int64 = 0
            for digit in digits {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(digit) else { return nil }
                let (times, overflow) = number.multipliedReportingOverflow(by: 10)
                let (sum, overflowAgain) = times.addingReportingOverflow(Int64(digit - UInt8(ascii: "0")))
                guard !overflow, !overflowAgain else { return nil }
                number = sum
            }
            // The same text, not only the same number ("05, 5" is refused, as on AsyncHTTPClient).
            guard first.map({ $0.elementsEqual(digits) }) ?? true else { return nil }
            first = first ?? ArraySlice(digits)
            length = number
        }
        return length
    }
}
