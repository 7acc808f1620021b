import Foundation
import HTTPTypes

/// A `Content-Type` value (RFC 9110 §8.3.1): `type/subtype` and parameters, read from
/// a server's bytes without trusting them.
///
/// Type, subtype and parameter names compare without case; a parameter value may be
/// quoted (`charset="utf-8"`, with `\` escapes). Without a slash or with an empty
/// type or subtype (or over 1 KiB) it is not a media type; a malformed parameter
/// ends the parameters (those before it are kept), as browsers do.
struct MediaType: Sendable, Equatable {
    /// `type/subtype`, lowercased.
    let essence: String
    /// Parameters by lowercased name; the first of a repeated name wins.
    let parameters: [String: String]

    /// The `charset` parameter, lowercased.
    var charset: String? { parameters["charset"]?.lowercased() }

    init?(_ text: String) {
        guard text.utf8.count <= 1024 else { return nil }
        let scalars = Array(text.unicodeScalars)
        var index = 0
        func skipSpace() { while index < scalars.count, scalars[index] == " " || scalars[index] == "\t" { index += 1 } }
        func token() -> String {
            let start = index
            while index < scalars.count, Self.isTokenScalar(scalars[index]) { index += 1 }
            var out = String.UnicodeScalarView()
            out.append(contentsOf: scalars[start..<index])
            return String(out)
        }

        skipSpace()
        let type = token()
        guard !type.isEmpty, index < scalars.count, scalars[index] == "/" else { return nil }
        index += 1
        let subtype = token()
        guard !subtype.isEmpty else { return nil }
        var parameters: [String: String] = [:]
        skipSpace()
        parameters: while index < scalars.count {
            guard scalars[index] == ";" else { break }
            index += 1
            skipSpace()
            if index == scalars.count { break }  // a trailing ";"
            if scalars[index] == ";" { continue }  // an empty parameter
            let name = token().lowercased()
            guard !name.isEmpty, index < scalars.count, scalars[index] == "=" else { break }
            index += 1
            var value = String.UnicodeScalarView()
            if index < scalars.count, scalars[index] == "\"" {
                index += 1
                var closed = false
                while index < scalars.count {
                    let scalar = scalars[index]
                    index += 1
                    if scalar == "\"" { closed = true; break }
                    if scalar == "\\" {
                        guard index < scalars.count else { break }
                        value.append(scalars[index])
                        index += 1
                    } else {
                        value.append(scalar)
                    }
                }
                guard closed else { break parameters }
            } else {
                let plain = token()
                guard !plain.isEmpty else { break }
                value.append(contentsOf: plain.unicodeScalars)
            }
            if parameters[name] == nil { parameters[name] = String(value) }
            skipSpace()
        }
        self.essence = type.lowercased() + "/" + subtype.lowercased()
        self.parameters = parameters
    }

    /// RFC 9110 `tchar`.
    private static func isTokenScalar(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
        default: "!#$%&'*+-.^_`|~".unicodeScalars.contains(scalar)
        }
    }

    /// The text encoding a `charset` names, for the charsets servers send; nil for
    /// one Catena does not decode.
    static func encoding(forCharset charset: String) -> String.Encoding? {
        switch charset.lowercased() {
        case "utf-8", "utf8": .utf8
        case "us-ascii", "ascii": .ascii
        case "iso-8859-1", "latin1", "iso_8859-1", "l1": .isoLatin1
        case "windows-1252", "cp1252": .windowsCP1252
        case "utf-16": .utf16
        case "utf-16le": .utf16LittleEndian
        case "utf-16be": .utf16BigEndian
        default: nil
        }
    }
}

extension HTTPFields {
    /// Nil when the `Content-Type` is one of `types` (compared by essence, without
    /// parameters); otherwise the words for an error that names what came (cut to 128
    /// characters) and what was expected.
    func contentTypeMismatch(expecting types: Set<String>) -> String? {
        if let essence = self[.contentType].flatMap(MediaType.init)?.essence, types.contains(essence) { return nil }
        let came = self[.contentType].map { "\"\($0.prefix(128))\"" } ?? "missing"
        let expected = types.count == 1 ? types.first! : "one of " + types.sorted().joined(separator: ", ")
        return "content type \(came), expected \(expected)"
    }
}
