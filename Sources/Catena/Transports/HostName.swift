import Foundation

/// Host names in the one form a transport connects to.
package enum HostName {
    /// `host` in lower case and, when it has letters beyond ASCII, in its IDNA
    /// (punycode) form: `bücher.example` is `xn--bcher-kva.example`, the name DNS and
    /// TLS see, so that pins, proxy bypass rules and routes keyed by either spelling
    /// find it. A name IDNA refuses is left in lower case (no rule keyed in ASCII finds it).
    package static func ascii(_ host: String) -> String {
        let lowered = host.lowercased()
        guard !lowered.utf8.allSatisfy({ $0 < 0x80 }) else { return lowered }
        var components = URLComponents()
        components.host = lowered
        guard let encoded = components.encodedHost, encoded.utf8.allSatisfy({ $0 < 0x80 && $0 != UInt8(ascii: "%") }) else { return lowered }
        return encoded.lowercased()
    }
}
