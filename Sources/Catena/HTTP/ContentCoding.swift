import HTTPTypes

/// The content codings a transport decodes, and the check that no response body reaches
/// a caller still encoded with one it did not decode.
package enum ContentCoding {
    /// What the transports ask for and decode: the codings zlib reads. No brotli or zstd
    /// decoder is in a kept Swift library here, and a hand-written one is not worth its risk.
    package static let acceptEncoding = "gzip, deflate"

    /// The members of a response's `Content-Encoding` field values, lowercased, in the
    /// order applied, blanks left out (`identity` kept: a decoder that reads only the
    /// first member, as NIO's does, decodes nothing of `identity, gzip`).
    package static func members(_ values: [String]) -> [String] {
        values.flatMap { $0.split(separator: ",") }
            .map { $0.trimmingASCIISpaces.lowercased() }
            .filter { !$0.isEmpty }
    }

    /// The codings of a response's `Content-Encoding` field values, lowercased, in the
    /// order applied, `identity` left out.
    package static func codings(_ values: [String]) -> [String] {
        members(values).filter { $0 != "identity" }
    }

    /// Fails with `invalidResponse` naming the codings when a response body is still
    /// encoded in a way the caller cannot read: neither decoded by the transport
    /// (`decoded` tells whether it was, from the field's ``members(_:)``) nor one the
    /// request's own `Accept-Encoding` asked for (by name or `*`, not with `q=0`), in
    /// which case the caller takes the bytes as the transport gives them.
    ///
    /// A redirect is not checked here: its body is dropped when it is followed, and
    /// ``Redirects`` checks the one it returns unfollowed (``checkUnfollowed(_:request:)``).
    package static func check(
        contentEncoding values: [String], status: Int, request: APIRequest, decoded: (_ members: [String]) -> Bool
    ) throws(CatenaError) {
        if values.isEmpty || request.method == .head || status < 200 || status == 204 || (300...399).contains(status) { return }
        let codings = codings(values)
        if codings.isEmpty || decoded(members(values)) { return }
        if let asked = request.headerFields[.acceptEncoding], codings.allSatisfy({ accepts(asked, coding: $0) }) { return }
        // Named in the error, a few and each cut short: the list is the server's to make long.
        var named = codings.prefix(4).map { "'\(String(decoding: $0.utf8.prefix(40), as: UTF8.self))'" }.joined(separator: ", ")
        if codings.count > 4 { named += " and \(codings.count - 4) more" }
        throw CatenaError(
            .invalidResponse, request: request,
            detail: "the response body is encoded with \(named), which Catena does not decode (it reads \(acceptEncoding))")
    }
}

extension ContentCoding {
    /// A redirect that ``Redirects`` hands over unfollowed (policy, another origin, no
    /// usable Location): its body must be readable like any other answer's. Both
    /// transports decode a single `gzip` or `deflate` when they decode at all.
    package static func checkUnfollowed(_ response: APIResponse, request: APIRequest) throws(CatenaError) {
        guard (300...399).contains(response.status.code), request.method != .head else { return }
        try check(contentEncoding: response.headerFields[values: .contentEncoding], status: 200, request: request) { members in
            let codings = members.filter { $0 != "identity" }
            return codings == ["gzip"] || codings == ["deflate"]
        }
    }

    /// The codings an `Accept-Encoding` value lists with a weight other than zero
    /// (RFC 9110, section 12.5.3), lowercased; `*` among them when it is.
    package static func acceptedCodings(_ value: String) -> Set<String> {
        Set(weights(value).filter { $0.value }.keys)
    }

    /// Whether an `Accept-Encoding` value accepts `coding`: by name with a weight other
    /// than zero; failing any mention of it, by `*` likewise. A coding named with `q=0`
    /// is refused whatever `*` says.
    package static func accepts(_ value: String, coding: String) -> Bool {
        let weights = weights(value)
        return weights[coding] ?? weights["*"] ?? false
    }

    /// Each listed coding, lowercased, and whether its weight is other than zero (the
    /// last mention wins).
    private static func weights(_ value: String) -> [String: Bool] {
        var weights: [String: Bool] = [:]
        for member in value.split(separator: ",") {
            let parts = member.split(separator: ";")
            guard let name = parts.first?.trimmingASCIISpaces.lowercased(), !name.isEmpty else { continue }
            let refused = parts.dropFirst().contains { parameter in
                let pair = parameter.split(separator: "=", maxSplits: 1)
                guard pair.count == 2, pair[0].trimmingASCIISpaces.lowercased() == "q" else { return false }
                return Double(pair[1].trimmingASCIISpaces) == 0
            }
            weights[name] = !refused
        }
        return weights
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
