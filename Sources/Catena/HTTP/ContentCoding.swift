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

    /// Fails with `invalidResponse` naming the coding when the body of `head` is still
    /// encoded in a way the caller cannot read: neither decoded by the transport
    /// (`decoded` tells whether it was) nor one the request's own `Accept-Encoding` asked
    /// for, in which case the caller takes the bytes as they are.
    package static func check(
        contentEncoding values: [String], status: Int, request: APIRequest, decoded: (_ codings: [String]) -> Bool
    ) throws(CatenaError) {
        // No body to decode; or a redirect, whose body is dropped when it is followed
        // and checked here per hop, before the transport knows whether it will be.
        if request.method == .head || status < 200 || status == 204 || (300...399).contains(status) { return }
        let codings = codings(values)
        if codings.isEmpty || decoded(codings) { return }
        if let asked = request.headerFields[.acceptEncoding] {
            let accepted = Set(asked.split(separator: ",").map { ($0.split(separator: ";").first ?? "").trimmingASCIISpaces.lowercased() })
            if codings.allSatisfy(accepted.contains) { return }
        }
        let named = codings.map { "'\(String($0.prefix(40)))'" }.joined(separator: ", ")
        throw CatenaError(
            .invalidResponse, request: request,
            detail: "the response body is encoded with \(named), which Catena does not decode (it reads \(acceptEncoding))")
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
