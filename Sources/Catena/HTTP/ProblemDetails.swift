public import Foundation

/// An error body in the shape RFC 9457 gives HTTP APIs (`application/problem+json`):
/// what kind of problem (`type`), a short summary (`title`), this occurrence's
/// explanation (`detail`), and any members of the API's own.
///
/// Read from a response with ``APIResponse/problem`` and from a failed call with
/// ``CatenaError/problem``. As the RFC says, a member of the wrong type is ignored, not
/// fatal: a `"status": "oops"` leaves `status` nil. The text is the server's: show it
/// with ``displayTitle`` and ``displayDetail``, which drop control characters and cap
/// the length.
public struct ProblemDetails: Sendable, Hashable {
    /// A URI naming the problem type; "about:blank" when the body gives none.
    public var type: String
    /// A short summary of the problem type.
    public var title: String?
    /// The status code the server meant (the response's own is authoritative).
    public var status: Int?
    /// An explanation of this occurrence.
    public var detail: String?
    /// A URI naming this occurrence.
    public var instance: String?
    /// The API's own members, such as `balance` or `errors`.
    public var extensions: [String: Value]

    /// A JSON value of an extension member.
    public indirect enum Value: Sendable, Hashable, Decodable {
        case null
        case bool(Bool)
        case number(Double)
        case string(String)
        case array([Value])
        case object([String: Value])

        public init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if container.decodeNil() {
                self = .null
            } else if let value = try? container.decode(Bool.self) {
                self = .bool(value)
            } else if let value = try? container.decode(Double.self) {
                self = .number(value)
            } else if let value = try? container.decode(String.self) {
                self = .string(value)
            } else if let value = try? container.decode([Value].self) {
                self = .array(value)
            } else {
                self = .object(try container.decode([String: Value].self))
            }
        }
    }

    /// A problem.
    public init(
        type: String = "about:blank", title: String? = nil, status: Int? = nil, detail: String? = nil, instance: String? = nil,
        extensions: [String: Value] = [:]
    ) {
        self.type = type
        self.title = title
        self.status = status
        self.detail = detail
        self.instance = instance
        self.extensions = extensions
    }

    /// The largest body read as a problem: a problem is a few lines, and every
    /// description of the error reads it again.
    public static let maximumSize = 256 * 1024

    /// The problem in `data`, a JSON object of at most ``maximumSize`` bytes; nil when
    /// it is not one.
    public init?(json data: Data) {
        guard data.count <= Self.maximumSize, let members = try? JSONDecoder().decode([String: Value].self, from: data) else { return nil }
        func text(_ name: String) -> String? {
            if case .string(let value) = members[name] { return value }
            return nil
        }
        type = text("type") ?? "about:blank"
        title = text("title")
        detail = text("detail")
        instance = text("instance")
        if case .number(let value) = members["status"], value.rounded() == value, (100...599).contains(value) { status = Int(value) }
        extensions = members.filter { !["type", "title", "status", "detail", "instance"].contains($0.key) }
    }

    /// The media type of a problem body.
    public static let mediaType = "application/problem+json"

    /// ``title`` as it may be shown: control characters replaced, at most 200 characters.
    public var displayTitle: String? { title.map { Self.printable($0, limit: 200) } }
    /// ``detail`` as it may be shown: control characters replaced, at most 1,000 characters.
    public var displayDetail: String? { detail.map { Self.printable($0, limit: 1000) } }

    /// ``title`` and ``detail`` as they may be shown for `request`'s answer: scrubbed of
    /// the secrets `request` sent (a server may echo them), then made printable.
    package func displayed(for request: APIRequest, redaction: Redaction) -> (title: String?, detail: String?) {
        (
            title.map { Self.printable(redaction.scrub($0, secretsOf: request), limit: 200) },
            detail.map { Self.printable(redaction.scrub($0, secretsOf: request), limit: 1000) }
        )
    }

    /// `text` on one line, without control, line-separator or bidirectional
    /// characters, cut at `limit` characters.
    package static func printable(_ text: String, limit: Int) -> String {
        var result = ""
        var count = 0
        for scalar in text.unicodeScalars {
            guard count < limit else {
                result += "…"
                break
            }
            let value = scalar.value
            // C0 and C1 controls, bidirectional marks and overrides, line and paragraph separators.
            let control =
                value < 0x20 || (0x7F...0x9F).contains(value) || value == 0x061C || (0x200E...0x200F).contains(value)
                || (0x2028...0x202E).contains(value) || (0x2066...0x2069).contains(value)
            result.unicodeScalars.append(control ? " " : scalar)
            count += 1
        }
        return result
    }
}

extension Redaction {
    /// `text` with every secret the request carried replaced by `<redacted>`: values of
    /// secret header fields, the credentials after their scheme (and a Basic pair's
    /// decoded user:password and password), each cookie's value, secret query values as
    /// sent and decoded, and the secret fields of a body made in memory (a form's
    /// `client_secret`, a JSON `password`). For text a server wrote that may echo them;
    /// scrub before cutting the text, so that no secret is cut in two. The one scrubber
    /// of server text: ``BodyScrubber`` learns the secrets.
    package func scrub(_ text: String, secretsOf request: APIRequest) -> String {
        var scrubber = BodyScrubber(redaction: self, limit: Self.scrubbedBodyLimit)
        // Only a form or JSON body is made again to read it: a multipart one may hold files.
        let type = request.body.contentType.flatMap(MediaType.init)?.essence ?? ""
        let readable = type == "application/x-www-form-urlencoded" || type == "application/json" || type.hasSuffix("+json")
        let body = request.body.stream == nil && readable ? (try? request.body.producedData()) ?? nil : nil
        scrubber.learnSecrets(of: request, body: body)
        return scrubber.scrub(text)
    }

    /// The largest request body read for secrets to scrub from a server's text.
    static let scrubbedBodyLimit = 256 * 1024
}

extension APIResponse {
    /// The body as problem details, when the response says it is one
    /// (`Content-Type: application/problem+json`) and it reads as a JSON object.
    public var problem: ProblemDetails? {
        guard let type = headerFields[.contentType],
            type.split(separator: ";", maxSplits: 1).first?.trimmingCharacters(in: .whitespaces).lowercased() == ProblemDetails.mediaType
        else { return nil }
        return ProblemDetails(json: body)
    }
}

extension CatenaError {
    /// The problem details of the response this error carries, when it has one; see
    /// ``ProblemDetails``.
    public var problem: ProblemDetails? { response?.problem }
}
