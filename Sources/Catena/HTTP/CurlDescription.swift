import Foundation
import HTTPTypes

extension APIRequest {
    /// A `curl` command that sends this request: method, URL, header fields and body,
    /// each quoted for a POSIX shell. Secrets print as `<redacted>` (the request's
    /// ``Redaction``, never less than the default), so the line is safe for logs and
    /// bug reports; ``curlDescription(redacting:)`` with `nil` prints them.
    public var curlDescription: String {
        curlDescription(redacting: Redaction.effective(for: self))
    }

    /// A `curl` command that sends this request, with the values `redaction` names
    /// printed as `<redacted>`; `nil` prints every value (for your own shell only).
    ///
    /// A relative request (no host yet) prints its path only: take the description
    /// below ``EnvironmentMiddleware`` (as ``LogMiddleware`` placed there does) for a whole
    /// URL. A text body is passed inline with `--data-raw`, which curl never reads as a
    /// file name (`--data-binary @NAME` would upload the file NAME); other bytes go
    /// through `base64 -d` and standard input, so the command sends exactly the bytes the
    /// transport would. A streamed or file body is not read: a comment names it. When
    /// redacting, a body is scrubbed as a `HARRecorder`'s are (secret form fields, JSON
    /// members and multipart parts; a body that is not UTF-8 text, or a JSON body that
    /// does not parse, is not shown, and a comment says so). No value reaches curl in a
    /// form it interprets: a URL with `[`, `]`, `{` or `}` gets `--globoff`, one that is
    /// not http or https (a relative `-K/tmp/x` would be read as an option) is passed
    /// with `--url` and `--proto =http,https`, an empty header value is written `Name;`
    /// (curl drops `Name:`), and every argument is single-quoted for the shell.
    public func curlDescription(redacting redaction: Redaction?) -> String {
        var lines: [String] = []
        var command = "curl"
        let snapshot = body.snapshot
        let hasBody: Bool
        if case .none = snapshot { hasBody = false } else { hasBody = true }
        switch method {
        // curl sends a GET or HEAD with a body as a POST unless told the method.
        case .get where !hasBody: break
        case .head where !hasBody: command += " --head"
        default: command += " -X " + Self.shellQuoted(method.rawValue)
        }
        let url = assembleURL(redacting: redaction)
        if url.contains(where: { "[]{}".contains($0) }) { command += " --globoff" }
        let lowercased = url.lowercased()
        if !lowercased.hasPrefix("http://") && !lowercased.hasPrefix("https://") { command += " --proto '=http,https' --url" }
        lines.append(command + " " + Self.shellQuoted(url))
        var fields = headerFields
        if fields[.contentType] == nil, let type = body.contentType, hasBody { fields[.contentType] = type }
        var scrubber = redaction.map { BodyScrubber(redaction: $0, limit: 1 << 20) }
        if case .bytes(let data) = snapshot { scrubber?.learnSecrets(of: self, body: data) } else { scrubber?.learnSecrets(of: self, body: nil) }
        for field in fields {
            let value = scrubber?.printableValue(of: field) ?? field.value
            lines.append("-H " + Self.shellQuoted(value.isEmpty ? "\(field.name.rawName);" : "\(field.name.rawName): \(value)"))
        }
        // With a body and no Content-Type, curl would add its own form type.
        if hasBody, fields[.contentType] == nil { lines.append("-H 'Content-Type:'") }
        if let encodings = fields[.acceptEncoding]?.lowercased(), ["gzip", "deflate", "br"].contains(where: encodings.contains) {
            lines.append("--compressed")
        }
        var prefix = ""
        switch snapshot {
        case .none:
            break
        case .bytes(let data):
            let shown = scrubber?.scrub(body: data, contentType: fields[.contentType]) ?? Self.unscrubbed(data)
            switch shown {
            case .text(let text, _) where !text.unicodeScalars.contains(where: { $0.value == 0 }):
                lines.append("--data-raw " + Self.shellQuoted(text))
            case .text(let text, _):
                prefix = Self.decoding(Data(text.utf8))
                lines.append("--data-binary @-")
            case .binary(let bytes, _):
                prefix = Self.decoding(bytes)
                lines.append("--data-binary @-")
            case .omitted(let reason):
                prefix = "# body not shown: \(reason)\n"
            }
        case .unreadable(let kind):
            prefix = "# body (\(kind.replacingOccurrences(of: "\n", with: " "))) not shown\n"
        }
        return prefix + lines.joined(separator: " \\\n  ")
    }

    /// A body shown as it is, for ``curlDescription(redacting:)`` with `nil`.
    private static func unscrubbed(_ data: Data) -> BodyScrubber.Scrubbed {
        String(data: data, encoding: .utf8).map { .text($0, redacted: false) } ?? .binary(data, redacted: false)
    }

    /// A shell pipeline's head that writes `bytes` to curl's standard input.
    private static func decoding(_ bytes: Data) -> String {
        "printf %s " + shellQuoted(bytes.base64EncodedString()) + " | base64 -d | "
    }

    /// `text` in single quotes for a POSIX shell: nothing inside is interpreted, and a
    /// single quote is closed, escaped and reopened.
    static func shellQuoted(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "'", with: #"'\''"#) + "'"
    }
}

extension APIRequest.Body {
    /// What a description can show of the body without sending it.
    enum Snapshot {
        case none
        case bytes(Data)
        /// A stream or file, which is not read for a description; or a body that
        /// failed to encode.
        case unreadable(String)
    }

    var snapshot: Snapshot {
        if isEmpty { return .none }
        if stream != nil { return .unreadable(kind) }
        guard let data = try? producedData() else { return .unreadable("\(kind), which does not encode") }
        return .bytes(data)
    }
}
