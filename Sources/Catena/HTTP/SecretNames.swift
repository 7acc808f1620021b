/// The one rule that decides whether a name is secret, for header fields, query items,
/// form fields, JSON members at any depth and multipart part names alike.
///
/// A name is compared after normalising it: ASCII letters lower-cased, and `_`, `-`, `.`,
/// `[`, `]` and spaces dropped, so `accessToken`, `access_token`, `Access-Token` and
/// `ACCESS.TOKEN` are all `accesstoken`. It is secret when it
///
/// - **contains** one of ``words`` (`password`, `secret`, `apikey`, `signature`,
///   `credential`, `authorization`, `cookie`, `hmac`, …),
/// - **ends with** one of ``suffixes`` (`token`, `key`, `code`, `auth`, `session`, `sid`,
///   …), unless it ends with one of ``readableEndings`` (`idempotencykey`, `publickey`,
///   `statuscode`, `maxtokens`, …),
/// - **is** one of ``names`` (`pass`, `pin`, `sig`, …), words too short or too common to
///   match inside other names,
/// - or is a bracketed form field (`user[pass]`, `api[key]`) whose last part is secret.
///
/// The lists come from what real APIs send: OAuth 2 (`access_token`, `refresh_token`,
/// `id_token`, `client_secret`, `code`, `code_verifier`, `client_assertion`), AWS
/// (`AccessToken`, `IdToken`, `X-Amz-Signature`, `X-Amz-Credential`,
/// `X-Amz-Security-Token`), Google (`key`, `X-Goog-Signature`, `X-Goog-Api-Key`),
/// Firebase (`idToken`, `refreshToken`), GitLab (`private_token`), Azure
/// (`Ocp-Apim-Subscription-Key`, `x-functions-key`, `sig`, `AccountKey`), Datadog
/// (`DD-APPLICATION-KEY`), Sentry (`X-Sentry-Auth`, `sentry_key`), Shopify
/// (`X-Shopify-Hmac-Sha256`), the OAuth device flow (`device_code`, `user_code`), session
/// cookies (`sid`, `connect.sid`, `PHPSESSID`, `JSESSIONID`). `token_type`, `max_tokens`,
/// `expires_in`, `Idempotency-Key` and `status_code` stay readable.
///
/// ``Redaction`` adds names and words of your own to this rule; nothing removes from it.
public enum SecretNames {
    /// A name containing one of these is secret.
    public static let words: [String] = [
        "password", "passwd", "passphrase", "passcode", "secret", "apikey", "accesskey", "privatekey", "signingkey",
        "subscriptionkey", "clientkey", "masterkey", "encryptionkey", "sessionkey", "authkey", "licensekey",
        "signature", "credential", "authorization", "authentication", "cookie", "hmac",
    ]

    /// A name ending with one of these is secret, unless it ends with one of
    /// ``readableEndings``.
    public static let suffixes: [String] = [
        "token", "tokens", "key", "code", "auth", "session", "sessionid", "sessid", "sid", "verifier", "assertion", "jwt", "otp",
    ]

    /// Endings that keep a name readable although it ends with one of ``suffixes``:
    /// identifiers, counts and codes that are not credentials.
    public static let readableEndings: [String] = [
        "idempotencykey", "publickey", "primarykey", "foreignkey", "sortkey", "partitionkey", "rangekey", "hashkey", "cachekey",
        "objectkey", "routingkey", "shardkey", "dedupkey", "dedupekey", "lookupkey", "messagekey", "translationkey",
        "localizationkey", "i18nkey", "compositekey", "indexkey", "hotkey", "monkey", "turkey", "whiskey", "jockey", "hockey",
        "statuscode", "errorcode", "responsecode", "reasoncode", "returncode", "exitcode", "httpcode", "countrycode",
        "currencycode", "languagecode", "localecode", "regioncode", "zipcode", "postcode", "postalcode", "areacode",
        "productcode", "barcode", "sourcecode", "colorcode", "colourcode", "unicode", "encode", "decode", "opcode",
        "maxtokens", "prompttokens", "completiontokens", "totaltokens", "inputtokens", "outputtokens", "cachedtokens",
        "reasoningtokens", "oauth",
    ]

    /// These names, whole, are secret.
    public static let names: Set<String> = ["pass", "pin", "pwd", "sig"]

    /// `name` as the rule compares it: ASCII letters lower-cased, `_`, `-`, `.`, `[`, `]`
    /// and spaces dropped.
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
        if matches(bytes[...]) { return true }
        for word in extraWords where !word.isEmpty && contains(bytes[...], Array(normalized(word).utf8)) { return true }
        // A bracketed form field (`user[pass]`): its last part is judged alone too.
        if name.utf8.contains(UInt8(ascii: "[")), let open = Array(name.utf8).lastIndex(of: UInt8(ascii: "[")) {
            let raw = Array(name.utf8)
            let part = raw[(open + 1)...].prefix { $0 != UInt8(ascii: "]") }.compactMap(normalizedByte)
            if !part.isEmpty, part.count < bytes.count, matches(part[...]) { return true }
        }
        return false
    }

    private static func matches(_ bytes: ArraySlice<UInt8>) -> Bool {
        for word in wordBytes where contains(bytes, word) { return true }
        if bytes.count <= 4, names.contains(String(decoding: bytes, as: UTF8.self)) { return true }
        guard suffixBytes.contains(where: { ends(bytes, $0) }) else { return false }
        return !readableBytes.contains { ends(bytes, $0) }
    }

    private static let wordBytes = words.map { Array($0.utf8) }
    private static let suffixBytes = suffixes.map { Array($0.utf8) }
    private static let readableBytes = readableEndings.map { Array($0.utf8) }

    private static func ends(_ bytes: ArraySlice<UInt8>, _ suffix: [UInt8]) -> Bool {
        bytes.count >= suffix.count && bytes.suffix(suffix.count).elementsEqual(suffix)
    }

    private static func normalizedByte(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): byte + 0x20
        case UInt8(ascii: "_"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: " "), UInt8(ascii: "["), UInt8(ascii: "]"): nil
        default: byte
        }
    }

    private static func contains(_ bytes: ArraySlice<UInt8>, _ word: [UInt8]) -> Bool {
        guard !word.isEmpty, bytes.count >= word.count else { return false }
        var start = bytes.startIndex
        while start <= bytes.endIndex - word.count {
            if bytes[start] == word[0], bytes[start..<start + word.count].elementsEqual(word) { return true }
            start += 1
        }
        return false
    }
}
