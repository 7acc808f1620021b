package import HTTPTypes

/// A `WWW-Authenticate: Bearer` challenge's parameters (RFC 6750 §3), read from a
/// server's answer: hostile input, so bounded and never trapping.
package struct BearerChallenge: Sendable, Equatable {
    /// `error`: `invalid_token` (renew it), `insufficient_scope` (renewing will not help),
    /// `invalid_request`, or another a server made up.
    package var error: String?
    /// `scope`, when the server names the scope the call needs.
    package var scope: String?

    /// The first Bearer challenge in `fields`, if there is one. Fields past 8 KiB are
    /// not read.
    package init?(in fields: HTTPFields) {
        for value in fields[values: .wwwAuthenticate] where value.utf8.count <= 8 * 1024 {
            if let challenge = Self.parse(Array(value.utf8)) {
                self = challenge
                return
            }
        }
        return nil
    }

    package init(error: String?, scope: String?) {
        self.error = error
        self.scope = scope
    }

    /// Reads `challenge *( "," challenge )`, where a challenge is a scheme token and
    /// `name=value` parameters (a token or a quoted string), RFC 9110 §11.
    private static func parse(_ bytes: [UInt8]) -> BearerChallenge? {
        var index = 0
        var inBearer = false
        var found: BearerChallenge?
        func skipSpace() { while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x09 { index += 1 } }
        func token() -> String {
            let start = index
            while index < bytes.count, isTokenByte(bytes[index]) { index += 1 }
            return String(decoding: bytes[start..<index], as: UTF8.self)
        }
        while index < bytes.count {
            skipSpace()
            if index < bytes.count, bytes[index] == 0x2C {  // ","
                index += 1
                continue
            }
            let name = token()
            guard !name.isEmpty else {
                index += 1  // a byte no rule allows: skip it rather than loop
                continue
            }
            skipSpace()
            if index < bytes.count, bytes[index] == 0x3D {  // "=": a parameter of the current challenge
                index += 1
                skipSpace()
                let value: String
                if index < bytes.count, bytes[index] == 0x22 {
                    value = quoted()
                } else {
                    value = token()
                }
                if inBearer, var challenge = found {
                    switch name.lowercased() {
                    case "error" where challenge.error == nil: challenge.error = printable(value)
                    case "scope" where challenge.scope == nil: challenge.scope = printable(value)
                    default: break
                    }
                    found = challenge
                }
            } else {
                // A new challenge's scheme (token68 credentials after it are skipped as tokens).
                if found != nil, inBearer { return found }
                inBearer = name.lowercased() == "bearer"
                if inBearer { found = BearerChallenge(error: nil, scope: nil) }
            }
        }
        return found

        func quoted() -> String {
            index += 1
            var result: [UInt8] = []
            while index < bytes.count, bytes[index] != 0x22 {
                if bytes[index] == 0x5C, index + 1 < bytes.count { index += 1 }  // a quoted pair
                result.append(bytes[index])
                index += 1
            }
            index += 1  // the closing quote, if any
            return String(decoding: result, as: UTF8.self)
        }
    }

    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "*"),
            UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"),
            UInt8(ascii: "~"), UInt8(ascii: "/"):
            true  // "/" belongs to token68, which a scheme's credentials may be
        default: false
        }
    }

    private static func printable(_ text: String) -> String {
        ProblemDetails.printable(text, limit: 200)
    }
}
