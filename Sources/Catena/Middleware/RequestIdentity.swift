import HTTPTypes

extension APIRequest {
    /// What, besides method, URL and header fields, decides who a request speaks for
    /// and where it goes: the credential header fields (`Authorization`,
    /// `Proxy-Authorization`, `Cookie`, every header the request's ``Redaction`` treats
    /// as secret, such as `X-Api-Key`, and every header ``EnvironmentMiddleware`` injected),
    /// the ``BasicCredentials`` and ``CompositeRoute`` options. Caches and de-duplication key by it, so answers never
    /// cross from one identity to another.
    ///
    /// A fingerprint, never the secret: a keyed hash (`Hasher`, seeded per process),
    /// empty when the request carries none of them.
    var identityFingerprint: String {
        let material = identityMaterial
        guard !material.isEmpty else { return "" }
        var hasher = Hasher()
        hasher.combine(material)
        return String(UInt(bitPattern: hasher.finalize()), radix: 36)
    }

    /// What the fingerprint is made of, in clear: hash it, never store or print it.
    /// Empty when the request speaks for no one.
    var identityMaterial: [String] {
        var material = credentialFields
        if let basic = self[option: BasicCredentials.self] { material += ["basic", basic.user, basic.password] }
        if let route = self[option: CompositeRoute.self] { material += ["route", route] }
        return material
    }

    /// Whether the request carries credentials, in its header fields or options.
    /// (Authorization, Proxy-Authorization, Cookie: what RFC 9111 §3.5 names. API-key
    /// headers only separate cache keys, through the fingerprint: a key injected into
    /// every request would otherwise keep anything private out of the cache.)
    var carriesCredentials: Bool {
        [HTTPField.Name.authorization, .proxyAuthorization, .cookie].contains { headerFields[$0] != nil }
            || self[option: BasicCredentials.self] != nil
    }

    /// "name: value" of every header field that speaks for someone: the credential
    /// headers, the secret ones the request's redaction names, and those the
    /// environment injected.
    private var credentialFields: [String] {
        guard !headerFields.isEmpty else { return [] }
        let redaction = Redaction.effective(for: self)
        let bound = self[option: OriginBoundHeaders.self]
        return headerFields.compactMap { field in
            let speaks =
                field.name == .authorization || field.name == .proxyAuthorization || field.name == .cookie
                || redaction.isSecretHeader(field.name) || bound.contains(field.name)
            return speaks ? field.name.canonicalName + ": " + field.value : nil
        }
    }
}
