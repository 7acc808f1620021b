import HTTPTypes

extension APIRequest {
    /// What, besides method, URL and header fields, decides who a request speaks for
    /// and where it goes: the credential header fields, the ``BasicCredentials`` and
    /// ``CompositeRoute`` options. Caches and de-duplication key by it, so answers never
    /// cross from one identity to another.
    ///
    /// A fingerprint, never the secret: a keyed hash (`Hasher`, seeded per process),
    /// empty when the request carries none of them.
    var identityFingerprint: String {
        let credentials = [HTTPField.Name.authorization, .proxyAuthorization, .cookie].compactMap { headerFields[$0] }
        let basic = self[option: BasicCredentials.self]
        let route = self[option: CompositeRoute.self]
        guard !credentials.isEmpty || basic != nil || route != nil else { return "" }
        var hasher = Hasher()
        hasher.combine(credentials)
        hasher.combine(basic?.user)
        hasher.combine(basic?.password)
        hasher.combine(route)
        return String(UInt(bitPattern: hasher.finalize()), radix: 36)
    }

    /// Whether the request carries credentials, in its header fields or options.
    var carriesCredentials: Bool {
        [HTTPField.Name.authorization, .proxyAuthorization, .cookie].contains { headerFields[$0] != nil }
            || self[option: BasicCredentials.self] != nil
    }
}
