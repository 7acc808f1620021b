import HTTPTypes

/// The content codings a transport decodes, and the check that no response body reaches
/// a caller still encoded with one it did not decode.
package enum ContentCoding {
    /// What the transports ask for and decode: the codings zlib reads. No brotli or zstd
    /// decoder is in a kept Swift library here, and a hand-written one is not worth its risk.
    package static let acceptEncoding = "gzip, deflate"

    /// The codings of a response's `Content-Encoding` field values, lowercased, in the
    /// order applied, `identity` left out.
    package static func codings(_ values: [String]) -> [String] {
        values.flatMap { $0.split(separator: ",") }
            .map { $0.trimmingASCIISpaces.lowercased() }
            .filter { !$0.isEmpty && $0 != "identity" }
    }

    /// Fails with `invalidResponse` naming the codings when a response body is still
    /// encoded in a way the caller cannot read: neither decoded by the transport
    /// (`decoded` tells whether it was) nor one the request's own `Accept-Encoding` asked
    /// for (by name or `*`, not with `q=0`), in which case the caller takes the bytes as
    /// the transport gives them.
    package static func check(
        contentEncoding values: [String], status: Int, request: APIRequest, decoded: (_ codings: [String]) -> Bool
    ) throws(CatenaError) {
        // No body to decode; or a redirect, whose body is dropped when it is followed
        // and checked here per hop, before the transport knows whether it will be.
        if values.isEmpty || request.method == .head || status < 200 || status == 204 || (300...399).contains(status) { return }
        let codings = codings(values)
        if codings.isEmpty || decoded(codings) { return }
        if let asked = request.headerFields[.acceptEncoding] {
            let accepted = acceptedCodings(asked)
            if accepted.contains("*") || codings.allSatisfy(accepted.contains) { return }
        }
        // Named in the error, a few and each cut short: the list is the server's to make long.
        var named = codings.prefix(4).map { "'\(String($0.prefix(40)))'" }.joined(separator: ", ")
        if codings.count > 4 { named += " and \(codings.count - 4) more" }
        throw CatenaError(
            .invalidResponse, request: request,
            detail: "the response body is encoded with \(named), which Catena does not decode (it reads \(acceptEncoding))")
    }
}

extension ContentCoding {
    /// The codings an `Accept-Encoding` value accepts: each listed one whose weight is
    /// not zero (RFC 9110, section 12.5.3), lowercased.
    package static func acceptedCodings(_ value: String) -> Set<String> {
        var accepted = Set<String>()
        for member in value.split(separator: ",") {
            let parts = member.split(separator: ";")
            guard let name = parts.first?.trimmingASCIISpaces.lowercased(), !name.isEmpty else { continue }
            let refused = parts.dropFirst().contains { parameter in
                let pair = parameter.split(separator: "=", maxSplits: 1)
                guard pair.count == 2, pair[0].trimmingASCIISpaces.lowercased() == "q" else { return false }
                return Double(pair[1].trimmingASCIISpaces) == 0
            }
            if !refused { accepted.insert(name) }
        }
        return accepted
    }
}

extension Substring {
    fileprivate var trimmingASCIISpaces: Substring {
        var text = self
        while let first = text.first, first == " " || first == "\t" { text.removeFirst() }
        while let last = text.last, last == " " || last == "\t" { text.removeLast() }
        return text
    }
}
