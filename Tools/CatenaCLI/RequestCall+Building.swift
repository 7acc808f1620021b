import Catena
import CatenaAsyncHTTPClient
import Foundation
import HTTPTypes

extension RequestCall {
    /// Header names a person passes with -H that carry no secret; every other name given
    /// with -H is treated as one (it is usually a key) and redacted in what is printed.
    static let plainHeaderNames: Set<String> = [
        "accept", "accept-language", "cache-control", "content-type", "if-match", "if-modified-since", "if-none-match",
        "prefer", "user-agent",
    ]

    /// The request the options describe: method, URL, query items, header fields,
    /// credentials, body, timeout, redirects and what to redact.
    func makeRequest(method: String, url: String) throws -> APIRequest {
        guard let method = HTTPRequest.Method(method.uppercased()) else {
            throw CommandFailure("\"\(method)\" is not an HTTP method")
        }
        var request = try APIRequest(method, urlString: url)
        var secretHeaders: [HTTPField.Name] = []
        var items: [URLQueryItem] = []
        for item in queryItems {
            guard let equals = item.firstIndex(of: "="), equals != item.startIndex else {
                throw CommandFailure("--query \"\(item)\" is not name=value")
            }
            items.append(URLQueryItem(name: String(item[..<equals]), value: String(item[item.index(after: equals)...])))
        }
        request.appendQueryItems(items)
        for header in headers {
            let field = try Self.field(header, option: "-H")
            if !Self.plainHeaderNames.contains(field.name.canonicalName) { secretHeaders.append(field.name) }
            request.headerFields.append(field)
        }
        let environment = ProcessInfo.processInfo.environment
        let bearer = try Self.credential(bearer, option: "--bearer", variable: "CATENA_BEARER", environment: environment)
        let basic = try Self.credential(basic, option: "--basic", variable: "CATENA_BASIC", environment: environment)
        let apiKey = try Self.credential(apiKey, option: "--api-key", variable: "CATENA_API_KEY", environment: environment)
        guard bearer == nil || basic == nil else { throw CommandFailure("give --bearer or --basic (or CATENA_BEARER or CATENA_BASIC), not both") }
        if let bearer {
            guard !bearer.isEmpty, !bearer.contains(where: \.isNewline) else { throw CommandFailure("--bearer needs a token on one line") }
            request.headerFields[.authorization] = "Bearer \(bearer)"
        }
        if let basic {
            let credentials = try Self.basicCredentials(basic)
            request.headerFields[.authorization] = credentials.headerValue
        }
        if let apiKey {
            guard let name = HTTPField.Name(apiKeyHeader) else { throw CommandFailure("--api-key-header \"\(apiKeyHeader)\" is not a header name") }
            let field = try Self.field("\(apiKeyHeader): \(apiKey)", option: "--api-key")
            request.headerFields[name] = field.value
            secretHeaders.append(name)
            request[option: OriginBoundHeaders.self].insert(name)
        }
        request[option: Redaction.self] = Redaction.adding(headers: secretHeaders)
        request.body = try makeBody(contentType: request.headerFields[.contentType])
        request.timeout = .milliseconds(Int64((timeout * 1000).rounded()))
        if !follow {
            request[option: RedirectPolicy.self] = .never
        } else if pinnedpubkey != nil {
            // The pins are the URL's host's: a redirect elsewhere would reach an unpinned server.
            request[option: RedirectPolicy.self] = .sameOrigin(max: 5)
        }
        return request
    }

    /// "Name: value" as a field; names what is wrong otherwise.
    static func field(_ text: String, option: String) throws -> HTTPField {
        guard let colon = text.firstIndex(of: ":") else {
            // Only the first word: the rest may be a credential typed without its colon.
            let first = text.prefix { !$0.isWhitespace }.prefix(40)
            throw CommandFailure("\(option) \"\(first)…\" is not \"Name: value\" (the rest is not shown)")
        }
        let name = text[..<colon].trimmingCharacters(in: .whitespaces)
        let value = text[text.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        guard let fieldName = HTTPField.Name(name) else { throw CommandFailure("\(option): \"\(name)\" is not a header name") }
        guard !value.unicodeScalars.contains(where: { $0.value < 0x20 && $0 != "\t" || $0.value == 0x7F }) else {
            throw CommandFailure("\(option) \(name): the value holds a control character (a line break, say)")
        }
        return HTTPField(name: fieldName, value: value)
    }

    /// A credential option's value: as given, read from `@FILE` or standard input (`-`),
    /// or from the environment variable when the option is not given, so a token need
    /// not stand in `ps` output or the shell's history. A file's or standard input's one
    /// trailing line break is dropped.
    static func credential(_ given: String?, option: String, variable: String, environment: [String: String]) throws -> String? {
        guard let given else { return environment[variable].flatMap { $0.isEmpty ? nil : $0 } }
        let data: Data
        if given == "-" {
            data = FileHandle.standardInput.readDataToEndOfFile()
        } else if given.hasPrefix("@") {
            let path = String(given.dropFirst())
            guard let read = FileManager.default.contents(atPath: path) else { throw CommandFailure("\(option) @\(path): the file cannot be read") }
            data = read
        } else {
            return given
        }
        guard var text = String(data: data, encoding: .utf8) else { throw CommandFailure("\(option): what was read is not UTF-8 text") }
        // "\r\n" is one Character: either line end goes whole.
        if text.last?.isNewline == true { text.removeLast() }
        guard !text.isEmpty else { throw CommandFailure("\(option): what was read is empty") }
        return text
    }

    /// `user:password`, or `user` with the password asked for on the terminal.
    static func basicCredentials(_ text: String) throws -> BasicCredentials {
        if let colon = text.firstIndex(of: ":") {
            return BasicCredentials(user: String(text[..<colon]), password: String(text[text.index(after: colon)...]))
        }
        guard isatty(0) == 1, let entered = getpass("Password for \(text): ") else {
            throw CommandFailure("--basic without a password and no terminal to ask for it on: give --basic user:password, @FILE or -")
        }
        return BasicCredentials(user: text, password: String(cString: entered))
    }

    private func makeBody(contentType: String?) throws -> APIRequest.Body {
        if let json {
            return try Self.jsonBody(Data(json.utf8), source: "--json")
        }
        if let jsonFile {
            let data: Data
            if jsonFile == "-" {
                data = FileHandle.standardInput.readDataToEndOfFile()
            } else {
                guard let read = FileManager.default.contents(atPath: jsonFile) else { throw CommandFailure("--json-file \(jsonFile) cannot be read") }
                data = read
            }
            return try Self.jsonBody(data, source: "--json-file \(jsonFile)")
        }
        if !formFields.isEmpty {
            var pairs: [(name: String, value: String)] = []
            for field in formFields {
                guard let equals = field.firstIndex(of: "="), equals != field.startIndex else {
                    throw CommandFailure("--form \"\(field)\" is not name=value")
                }
                pairs.append((String(field[..<equals]), String(field[field.index(after: equals)...])))
            }
            return .form(pairs)
        }
        if let upload {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: upload, isDirectory: &isDirectory), !isDirectory.boolValue,
                FileManager.default.isReadableFile(atPath: upload)
            else { throw CommandFailure("--upload \(upload) is not a readable file") }
            return .file(URL(fileURLWithPath: upload), contentType: contentType ?? "application/octet-stream")
        }
        return .empty
    }

    /// A JSON body sent byte for byte as given, once Foundation has read it as JSON.
    static func jsonBody(_ data: Data, source: String) throws -> APIRequest.Body {
        do {
            _ = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
        } catch {
            throw CommandFailure("\(source) is not JSON")
        }
        return .data(data, contentType: "application/json")
    }

    /// The transport the options ask for, and how to shut it down; `host` is the URL's,
    /// which `--pinnedpubkey` pins.
    func makeTransport(host: String) throws -> (any HTTPLoader, @Sendable () async throws -> Void) {
        var trust = ServerTrust.system
        func certificates(_ path: String, option: String) throws -> [Data] {
            do {
                return try ServerTrust.certificates(fromPEM: String(contentsOfFile: path, encoding: .utf8))
            } catch {
                throw CommandFailure("\(option) \(path): \(error)")
            }
        }
        if let caFile { trust.additionalRoots += try certificates(caFile, option: "--ca-file") }
        if let pin {
            trust.additionalRoots += try certificates(pin, option: "--pin")
            trust.excludesSystemRoots = true
        }
        if let pinnedpubkey {
            let pins = pinnedpubkey.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
            guard !pins.isEmpty, pins.allSatisfy({ $0.hasPrefix("sha256//") }) else {
                throw CommandFailure("--pinnedpubkey takes sha256//BASE64 pins separated by ';' (a key file is not supported)")
            }
            trust.publicKeyPins[host.lowercased()] = Set(pins)
        }
        let limit = Duration.milliseconds(Int64((timeout * 1000).rounded()))
        let identity = try clientIdentity()
        let proxies = try proxySettings()
        switch transport {
        case .urlsession:
            guard !trust.isSystemDefault || identity != nil else { return (URLSessionTransport(timeout: limit), {}) }
            do {
                return (try URLSessionTransport(trust: trust, identity: identity, timeout: limit), {})
            } catch {
                throw CommandFailure("URLSession cannot use that trust or client certificate: \(error)")
            }
        case .ahc:
            var configuration = AsyncHTTPClientTransport.defaultConfiguration
            if http1 { configuration.httpVersion = .http1Only }
            let transport: AsyncHTTPClientTransport
            var overrides: [ConnectOverride] = []
            do {
                overrides =
                    try resolve.map { text throws(ConnectOverrideError) in try ConnectOverride(resolve: text) }
                    + connectTo.map { text throws(ConnectOverrideError) in try ConnectOverride(connectTo: text) }
            } catch {
                throw CommandFailure("\(error)")
            }
            if trust.isSystemDefault, identity == nil, proxies == nil, overrides.isEmpty {
                transport = AsyncHTTPClientTransport(configuration: configuration, timeout: limit)
            } else {
                do {
                    transport = try AsyncHTTPClientTransport(
                        configuration: configuration, trust: trust, identity: identity, proxy: proxies, connectTo: overrides, timeout: limit)
                } catch {
                    throw CommandFailure("AsyncHTTPClient cannot use these settings: \(error)")
                }
            }
            return (transport, { try await transport.shutdown() })
        }
    }

    /// The proxies as curl picks them: `--proxy` (`""`: none) over the environment's
    /// variables, `--noproxy` over `NO_PROXY`, `--proxy-user` over a proxy URL's own.
    func proxySettings() throws -> ProxySettings? {
        var settings: ProxySettings?
        do {
            if let proxy {
                settings =
                    proxy.isEmpty
                    ? nil
                    : try ProxySettings(
                        proxy, bypass: ProxyBypass(Self.noProxyVariable(ProcessInfo.processInfo.environment)))
            } else {
                settings = try ProxySettings.environment()
            }
        } catch {
            throw CommandFailure("\(proxy == nil ? "the proxy environment variable " : "--proxy ")\(error)")
        }
        if let noproxy { settings?.bypass = ProxyBypass(noproxy) }
        if let proxyUser, let given = try Self.credential(proxyUser, option: "--proxy-user", variable: "", environment: [:]) {
            guard let colon = given.firstIndex(of: ":") else { throw CommandFailure("--proxy-user takes user:password") }
            let credentials = BasicCredentials(user: String(given[..<colon]), password: String(given[given.index(after: colon)...]))
            settings?.http?.credentials = credentials
            settings?.https?.credentials = credentials
        }
        return settings
    }

    /// `no_proxy`, else `NO_PROXY`, an empty one as unset (as `ProxySettings.environment` reads it).
    static func noProxyVariable(_ variables: [String: String]) -> String {
        [variables["no_proxy"], variables["NO_PROXY"]].compactMap { $0?.trimmingCharacters(in: .whitespaces) }.first { !$0.isEmpty } ?? ""
    }

    /// `--cert`, `--key`, `--cert-type` and `--pass` as curl reads them: a PEM file may
    /// hold the key after the certificate; a P12 bundle's password comes from `--pass`.
    func clientIdentity() throws -> ClientIdentity? {
        guard let cert else {
            guard key == nil else { throw CommandFailure("--key needs --cert") }
            return nil
        }
        func read(_ path: String, _ option: String) throws -> Data {
            guard let data = FileManager.default.contents(atPath: path) else { throw CommandFailure("\(option) \(path): the file cannot be read") }
            return data
        }
        let certificate = try read(cert, "--cert")
        switch certType.uppercased() {
        case "PEM":
            let text = String(decoding: certificate, as: UTF8.self)
            let keyText = try key.map { String(decoding: try read($0, "--key"), as: UTF8.self) } ?? text
            guard keyText.contains("PRIVATE KEY-----") else {
                throw CommandFailure(key == nil ? "--cert \(cert) holds no private key: give --key" : "--key holds no PEM private key")
            }
            return ClientIdentity(certificateChainPEM: text, privateKeyPEM: keyText)
        case "DER":
            guard let key else { throw CommandFailure("--cert-type DER needs --key (a DER private key)") }
            return ClientIdentity(certificateChainDER: [certificate], privateKeyDER: try read(key, "--key"))
        case "P12":
            let password =
                try Self.credential(pass, option: "--pass", variable: "CATENA_CERT_PASSWORD", environment: ProcessInfo.processInfo.environment) ?? ""
            return ClientIdentity(pkcs12: certificate, password: password)
        default:
            throw CommandFailure("--cert-type must be PEM, DER or P12")
        }
    }
}
