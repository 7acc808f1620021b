/// The one rule that decides whether a name is secret, for header fields, query items,
/// form fields, JSON members at any depth and multipart part names alike.
///
/// A name is compared after normalising it: ASCII letters lower-cased, and `_`, `-`, `.`
/// and spaces dropped, so `accessToken`, `access_token`, `Access-Token` and
/// `ACCESS.TOKEN` are all `accesstoken`. It is secret when it
///
/// - **contains** one of ``words`` (`password`, `secret`, `apikey`, `signature`,
///   `credential`, `authorization`, `cookie`, …),
/// - **ends with** one of ``suffixes`` (`token`, `session`, `sessionid`, `verifier`, …),
/// - or **is** one of ``names`` (`key`, `code`, `sig`, `auth`, …), words too short or
///   too common to match inside other names.
///
/// The lists come from what real APIs send: OAuth 2 (`access_token`, `refresh_token`,
/// `id_token`, `client_secret`, `code`, `code_verifier`, `client_assertion`), AWS
/// (`AccessToken`, `IdToken`, `X-Amz-Signature`, `X-Amz-Credential`,
/// `X-Amz-Security-Token`), Google (`key`, `X-Goog-Signature`, `X-Goog-Api-Key`),
/// Firebase (`idToken`, `refreshToken`), GitLab (`private_token`), Azure
/// (`Ocp-Apim-Subscription-Key`, `sig`), session cookies (`sid`, `PHPSESSID`,
/// `JSESSIONID`). `token_type`, `max_tokens` and `expires_in` stay readable.
///
/// ``Redaction`` adds names and words of your own to this rule; nothing removes from it.
public enum SecretNames {
    /// A name containing one of these is secret.
    public static let words: [String] = [
        "password", "passwd", "passphrase", "secret", "apikey", "accesskey", "privatekey", "signingkey",
        "subscriptionkey", "clientkey", "masterkey", "encryptionkey", "sessionkey", "authkey", "licensekey",
        "signature", "credential", "authorization", "cookie",
    ]

    /// A name ending with one of these is secret.
    public static let suffixes: [String] = ["token", "session", "sessionid", "sessid", "verifier", "assertion", "jwt", "otp"]

    /// These names, whole, are secret.
    public static let names: Set<String> = ["key", "code", "sig", "sid", "auth", "pin", "pwd", "pass"]

    /// `name` as the rule compares it: ASCII letters lower-cased, `_`, `-`, `.` and
    /// spaces dropped.
    public static func normalized(_ name: some StringProtocol) -> String {
        String(decoding: name.utf8.compactMap(normalizedByte), as: UTF8.self)
    }

    /// Whether `name` is secret by the rule alone, or by one of `extraWords` (each
    /// normalised, matched anywhere in the name).
    public static func isSecret(_ name: some StringProtocol, extraWords: Set<String> = []) -> Bool {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(name.utf8.count)
        for byte in name.utf8 {
            if let kept = normalizedByte(byte) { bytes.append(kept) }
        }
        guard !bytes.isEmpty else { return false }
        for word in wordBytes where contains(bytes, word) { return true }
        for suffix in suffixBytes where bytes.count >= suffix.count && bytes.suffix(suffix.count).elementsEqual(suffix) { return true }
        if bytes.count <= 4, names.contains(String(decoding: bytes, as: UTF8.self)) { return true }
        for word in extraWords where !word.isEmpty && contains(bytes, Array(normalized(word).utf8)) { return true }
        return false
    }

    private static let wordBytes = words.map { Array($0.utf8) }
    private static let suffixBytes = suffixes.map { Array($0.utf8) }

    private static func normalizedByte(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): byte + 0x20
        case UInt8(ascii: "_"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: " "): nil
        default: byte
        }
    }

    private static func contains(_ bytes: [UInt8], _ word: [UInt8]) -> Bool {
        guard !word.isEmpty, bytes.count >= word.count else { return false }
        for start in 0...(bytes.count - word.count) where bytes[start] == word[0] {
            if bytes[start..<start + word.count].elementsEqual(word) { return true }
        }
        return false
    }
}
