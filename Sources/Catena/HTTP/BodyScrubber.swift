package import Foundation
package import HTTPTypes

/// What a recording or a printed request may show of a body: secret values replaced,
/// every other byte kept, or nothing at all when the body cannot be read for secrets.
///
/// One scrubber serves one exchange: ``learnSecrets(of:body:)`` collects the secret
/// values the request carried (header values and each cookie, secret query items, form
/// fields, JSON members and multipart parts), and ``scrub(_:)`` replaces them wherever
/// they show up again, such as a server's echo of the request.
package struct BodyScrubber: Sendable {
    package let redaction: Redaction
    /// The largest body read for secrets; a larger one is left out.
    package let limit: Int
    /// Keeps a body that cannot be read for secrets (binary, not UTF-8) as its bytes.
    package let keepsUnreadable: Bool
    /// The secret values the request carried, longest first.
    package private(set) var secretValues: [String] = []

    package init(redaction: Redaction, limit: Int, keepsUnreadable: Bool = false) {
        self.redaction = redaction
        self.limit = limit
        self.keepsUnreadable = keepsUnreadable
    }

    /// A body as it may be shown.
    package enum Scrubbed: Sendable, Equatable {
        /// Text, and whether anything in it was replaced.
        case text(String, redacted: Bool)
        /// Bytes that are not UTF-8 text, secret parts replaced (a multipart body with a
        /// file part), or kept as they are because the caller asked.
        case binary(Data, redacted: Bool)
        /// Left out, and why.
        case omitted(String)
    }

    /// The note on a body whose secrets were replaced.
    package static let redactedNote = "redacted: secret values replaced with \(Redaction.placeholder); every other byte as sent"

    // MARK: Learning

    /// Collects the values of `request`'s secret headers (the credential after a scheme
    /// such as "Bearer", and each cookie of a `Cookie` header, too), secret query items,
    /// and the secret fields of `body`.
    package mutating func learnSecrets(of request: APIRequest, body: Data?) {
        var values: [String] = []
        for field in request.headerFields where redaction.isSecretHeader(field.name) {
            let value = field.value.trimmingCharacters(in: .whitespaces)
            values.append(value)
            if let space = value.lastIndex(of: " ") {
                let credentials = String(value[value.index(after: space)...])
                values.append(credentials)
                // Basic: the decoded user:password, and the password as sent and form-decoded
                // (OAuth clients form-encode each part, RFC 6749 §2.3.1).
                if value.lowercased().hasPrefix("basic "), let data = Data(base64Encoded: credentials),
                    let pair = String(data: data, encoding: .utf8), let colon = pair.firstIndex(of: ":")
                {
                    let password = pair[pair.index(after: colon)...]
                    values += [pair, String(password), Self.formDecoded(password)]
                }
            }
            if field.name == .cookie {
                for pair in value.split(separator: ";") {
                    guard let equals = pair.firstIndex(of: "=") else { continue }
                    values.append(pair[pair.index(after: equals)...].trimmingCharacters(in: .whitespaces))
                }
            }
        }
        for item in request.queryItems where redaction.isSecretQueryItem(item.name) {
            if let value = item.value { values.append(value) }
        }
        // Secret query values as sent, percent-encoded, too: a server may echo the raw query.
        for pair in (request.percentEncodedQuery ?? "").split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            if parts.count == 2, redaction.isSecretQueryItem(parts[0].removingPercentEncoding ?? String(parts[0])) { values.append(String(parts[1])) }
        }
        if let body, body.count <= limit {
            let type = request.headerFields[.contentType] ?? request.body.contentType
            collect(body, contentType: type, depth: 0, into: &values)
        }
        // Four characters at least: replacing "1" everywhere would garble the record.
        let kept = Set(values.filter { $0.count >= 4 && $0 != Redaction.placeholder })
        secretValues = (Set(secretValues).union(kept)).sorted { $0.count > $1.count }
    }

    private func collect(_ body: Data, contentType: String?, depth: Int, into values: inout [String]) {
        let type = contentType.flatMap(MediaType.init)
        if type?.essence == "application/x-www-form-urlencoded", let text = String(data: body, encoding: .utf8) {
            for pair in text.split(separator: "&") {
                guard let equals = pair.firstIndex(of: "="), redaction.isSecret(name: Self.formDecoded(pair[..<equals])) else { continue }
                values.append(String(pair[pair.index(after: equals)...]))
                values.append(Self.formDecoded(pair[pair.index(after: equals)...]))
            }
        } else if type?.essence.hasPrefix("multipart/") == true, depth == 0, let boundary = type?.parameters["boundary"] {
            for part in Multipart.parts(of: body, boundary: boundary) ?? [] {
                if redaction.isSecret(name: part.name ?? ""), let text = String(data: body[part.body], encoding: .utf8) {
                    values.append(text)
                } else {
                    collect(Data(body[part.body]), contentType: part.contentType, depth: depth + 1, into: &values)
                }
            }
        } else if Self.looksLikeJSON(body), let object = try? JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed]) {
            collectJSON(object, depth: 0, into: &values)
        }
    }

    private func collectJSON(_ value: Any, depth: Int, into values: inout [String]) {
        guard depth < 64 else { return }
        if let object = value as? [String: Any] {
            for (key, member) in object {
                if redaction.isSecret(name: key) {
                    Self.leaves(of: member, depth: depth + 1, into: &values)
                } else {
                    collectJSON(member, depth: depth + 1, into: &values)
                }
            }
        } else if let array = value as? [Any] {
            for member in array { collectJSON(member, depth: depth + 1, into: &values) }
        }
    }

    /// Every string and number inside a secret member (`"pin": 123456`, `"keys": ["…"]`).
    private static func leaves(of value: Any, depth: Int, into values: inout [String]) {
        guard depth < 64 else { return }
        switch value {
        case let text as String: values.append(text)
        case let number as NSNumber: values.append(number.stringValue)
        case let array as [Any]: for member in array { leaves(of: member, depth: depth + 1, into: &values) }
        case let object as [String: Any]: for member in object.values { leaves(of: member, depth: depth + 1, into: &values) }
        default: break
        }
    }

    // MARK: Scrubbing

    /// `text` with every secret value of the request replaced.
    package func scrub(_ text: String) -> String {
        secretValues.reduce(text) { $0.replacingOccurrences(of: $1, with: Redaction.placeholder) }
    }

    /// A header field's value as it may be shown: ``Redaction/printableValue(of:)``, and
    /// then the request's secret values replaced (an echo in a response header).
    package func printableValue(of field: HTTPField) -> String {
        let value = redaction.printableValue(of: field)
        return value == Redaction.placeholder ? value : scrub(value)
    }

    /// `body` as it may be shown. JSON is read as JSON whatever its `Content-Type` says;
    /// a form by its fields; a multipart body part by part, a secret part's bytes
    /// replaced; other UTF-8 text with the request's secret values replaced. A body
    /// over the limit, or one that cannot be read for secrets, is left out.
    package func scrub(body: Data, contentType: String?) -> Scrubbed {
        guard body.count <= limit else { return .omitted("over the \(limit)-byte limit for a body read for secrets") }
        return scrub(body, contentType: contentType, depth: 0)
    }

    private func scrub(_ body: Data, contentType: String?, depth: Int) -> Scrubbed {
        let type = contentType.flatMap(MediaType.init)
        if type?.essence.hasPrefix("multipart/") == true {
            guard depth == 0, let boundary = type?.parameters["boundary"], let scrubbed = scrubMultipart(body, boundary: boundary) else {
                return .omitted("a multipart body that could not be read for secrets")
            }
            return scrubbed
        }
        guard let text = String(data: body, encoding: .utf8) else {
            if keepsUnreadable { return .binary(body, redacted: false) }
            return .omitted("\(body.count) bytes that are not UTF-8 text, which cannot be read for secrets")
        }
        if type?.essence == "application/x-www-form-urlencoded" {
            let scrubbed = scrub(redactForm(text))
            return .text(scrubbed, redacted: scrubbed != text)
        }
        let saysJSON = type.map { $0.essence.hasSuffix("/json") || $0.essence.hasSuffix("+json") } ?? false
        if saysJSON || Self.looksLikeJSON(body) {
            switch scrubJSON(body) {
            case .scrubbed(let scrubbed): return .text(scrubbed, redacted: scrubbed != text)
            // JSON the scanner cannot read whole (nested past its depth) could hide a
            // secret where the reading stopped; so could a body that says it is JSON.
            case .unreadable: return .omitted("a JSON body that could not be read for secrets")
            // Text that only looks like JSON is text.
            case .notJSON: if saysJSON { return .omitted("a JSON body that could not be read for secrets") }
            }
        }
        let scrubbed = scrub(text)
        return .text(scrubbed, redacted: scrubbed != text)
    }

    private enum JSONScrub {
        case scrubbed(String)
        case unreadable
        case notJSON
    }

    /// The JSON text with each secret member's value, and each string holding a secret
    /// value of the request, replaced; every other byte as it was.
    private func scrubJSON(_ body: Data) -> JSONScrub {
        guard (try? JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed])) != nil else { return .notJSON }
        let bytes = Array(body)
        let secretValues = secretValues
        let redaction = redaction
        guard
            let spans = JSONSecretSpans.find(
                in: bytes, isSecret: { redaction.isSecret(name: $0) },
                isSecretText: { text in
                    // A URL (absolute, relative or an app's scheme) whose user info, query or
                    // fragment carries a secret is a secret as a whole.
                    secretValues.contains { text.contains($0) }
                        || ((text.contains("?") || text.contains("#") || text.contains("@")) && redaction.redact(urlString: text) != text)
                }),
            let text = String(bytes: JSONSecretSpans.replacing(spans, in: bytes, with: Array("\"\(Redaction.placeholder)\"".utf8)), encoding: .utf8)
        else { return .unreadable }
        // Values written without escapes, such as a secret inside a longer string.
        return .scrubbed(scrub(text))
    }

    private func redactForm(_ text: String) -> String {
        text.split(separator: "&", omittingEmptySubsequences: false).map { pair in
            guard let equals = pair.firstIndex(of: "=") else { return String(pair) }
            return redaction.isSecret(name: Self.formDecoded(pair[..<equals])) ? pair[...equals] + Redaction.placeholder : String(pair)
        }.joined(separator: "&")
    }

    /// Each part scrubbed by its name: a secret part's bytes replaced, another part's
    /// text scrubbed as a body of its own type, a binary part kept as it is.
    private func scrubMultipart(_ body: Data, boundary: String) -> Scrubbed? {
        guard let parts = Multipart.parts(of: body, boundary: boundary) else { return nil }
        var out = Data()
        var start = body.startIndex
        var redacted = false
        for part in parts {
            out.append(body[start..<part.body.lowerBound])
            start = part.body.upperBound
            let content = Data(body[part.body])
            if redaction.isSecret(name: part.name ?? "") {
                out.append(contentsOf: Array(Redaction.placeholder.utf8))
                redacted = true
                continue
            }
            guard String(data: content, encoding: .utf8) != nil else {
                // A file part under a plain name keeps its bytes (the caller chose the name).
                out.append(content)
                continue
            }
            switch scrub(content, contentType: part.contentType, depth: 1) {
            case .text(let text, let changed):
                out.append(contentsOf: Array(text.utf8))
                redacted = redacted || changed
            case .binary:
                // A file part under a plain name: its bytes, as they were.
                out.append(content)
            case .omitted(let reason):
                // JSON that does not read, a multipart inside a multipart: not shown.
                out.append(contentsOf: Array("<not shown: \(reason)>".utf8))
                redacted = true
            }
        }
        out.append(body[start...])
        if let text = String(data: out, encoding: .utf8) { return .text(text, redacted: redacted) }
        return .binary(out, redacted: redacted)
    }

    /// Whether `body` starts, after white space, as a JSON object or array does.
    static func looksLikeJSON(_ body: Data) -> Bool {
        guard let first = body.first(where: { $0 != 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D }) else { return false }
        return first == UInt8(ascii: "{") || first == UInt8(ascii: "[")
    }

    static func formDecoded(_ part: Substring) -> String {
        part.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(part)
    }
}

/// The parts of a multipart body (RFC 2046, section 5.1), found without copying it.
enum Multipart {
    struct Part {
        /// The `name` parameter of its `Content-Disposition`.
        var name: String?
        var contentType: String?
        /// Where its content is in the body.
        var body: Range<Data.Index>
    }

    /// The parts between the boundaries, or nil when the body is not framed by
    /// `boundary` as RFC 2046 says (no closing delimiter, a part without a head), or
    /// has more than 1,000 parts.
    static func parts(of body: Data, boundary: String) -> [Part]? {
        guard !boundary.isEmpty, boundary.utf8.count <= 200 else { return nil }
        let delimiter = Data("--\(boundary)".utf8)
        let crlf = Data("\r\n".utf8)
        guard var found = body.firstRange(of: delimiter) else { return nil }
        var parts: [Part] = []
        while parts.count <= 1_000 {
            var cursor = found.upperBound
            // The close delimiter ends the body.
            if body[cursor...].starts(with: Data("--".utf8)) { return parts }
            guard let lineEnd = body[cursor...].firstRange(of: crlf) else { return nil }
            cursor = lineEnd.upperBound
            guard let headEnd = body[cursor...].firstRange(of: Data("\r\n\r\n".utf8)) ?? (body[cursor...].starts(with: crlf) ? cursor..<cursor + 2 : nil)
            else { return nil }
            // A part's head is a few short lines; a huge one is not read.
            guard headEnd.lowerBound - cursor <= 8_192 else { return nil }
            let head = String(decoding: body[cursor..<headEnd.lowerBound], as: UTF8.self)
            let contentStart = headEnd.upperBound
            guard let next = body[contentStart...].firstRange(of: crlf + delimiter) else { return nil }
            var part = Part(body: contentStart..<next.lowerBound)
            for line in head.split(separator: "\r\n") {
                guard let colon = line.firstIndex(of: ":") else { continue }
                let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
                let value = String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces)
                if name == "content-type" { part.contentType = value }
                if name == "content-disposition" { part.name = dispositionName(value) }
            }
            parts.append(part)
            found = next.lowerBound + crlf.count..<next.upperBound
        }
        return nil
    }

    /// The `name` parameter of a `Content-Disposition` value (quoted or not), found in
    /// one pass over the value.
    static func dispositionName(_ value: String) -> String? {
        let bytes = Array(value.utf8)
        var index = 0
        var quoted = false
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") { quoted.toggle() }
            index += 1
            guard byte == UInt8(ascii: ";"), !quoted else { continue }
            while index < bytes.count, bytes[index] == UInt8(ascii: " ") || bytes[index] == UInt8(ascii: "\t") { index += 1 }
            let name = Array("name=".utf8)
            guard index + name.count <= bytes.count,
                zip(bytes[index..<index + name.count], name).allSatisfy({ ($0 | 0x20) == $1 || $0 == $1 })
            else { continue }
            var start = index + name.count
            if start < bytes.count, bytes[start] == UInt8(ascii: "\"") {
                start += 1
                let end = bytes[start...].firstIndex(of: UInt8(ascii: "\"")) ?? bytes.count
                return String(decoding: bytes[start..<end], as: UTF8.self)
            }
            let end = bytes[start...].firstIndex(of: UInt8(ascii: ";")) ?? bytes.count
            return String(decoding: bytes[start..<end], as: UTF8.self).trimmingCharacters(in: .whitespaces)
        }
        return nil
    }
}
