public import Foundation
import HTTPTypes

extension CatenaError.Code {
    /// The server answered, but the API reports a failure in its own terms (Flickr's
    /// `"stat": "fail"` inside a 200, say).
    public static let apiFailure = CatenaError.Code(rawValue: "API failure")
}

/// What an endpoint needs from the client that sends it.
public struct EndpointContext: Sendable {
    /// The client's JSON decoder, for endpoints that do not bring their own.
    public var decoder: JSONDecoder

    public init(decoder: JSONDecoder = JSONDecoder()) {
        self.decoder = decoder
    }
}

/// The error body an API sends with a failed response, such as reqres's
/// `{"error": "Missing password"}`. An endpoint names its type as `ErrorBody`; a
/// failed response's ``CatenaError`` then carries the decoded body as its
/// `underlyingError` (see ``CatenaError/apiError(as:)``).
public protocol APIErrorBody: Error, Decodable, Sendable {}

/// The `ErrorBody` of endpoints whose API defines none: never decodes.
public struct NoErrorBody: APIErrorBody {
    public init(from decoder: any Decoder) throws {
        throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "this API defines no error body"))
    }
}

/// One call of an API: how to build its request, whether a response is acceptable,
/// and how to turn the response into content (Apexy's design).
///
/// ```swift
/// struct UserEndpoint: JSONEndpoint {
///     typealias Content = SingleUser
///     let id: Int
///     func makeRequest() throws -> APIRequest { try .get("api", "users", String(id)) }
/// }
/// let user = try await client.send(UserEndpoint(id: 2))
/// ```
public protocol Endpoint: Sendable {
    /// What a successful call produces.
    associatedtype Content: Sendable
    /// The API's error body, decoded from failed responses.
    associatedtype ErrorBody: APIErrorBody = NoErrorBody

    /// Builds the request. Throw ``EndpointInputError`` (or a ``CatenaError``) for bad
    /// input; the client reports it as `invalidRequest` naming this endpoint.
    func makeRequest() throws -> APIRequest

    /// Accepts or rejects the response. The default accepts 2xx; otherwise it throws
    /// `unacceptableStatus` with the decoded ``ErrorBody`` when there is one.
    func validate(_ response: APIResponse) throws

    /// Turns an accepted response into content.
    func content(from response: APIResponse, context: EndpointContext) throws -> Content
}

extension Endpoint {
    public func validate(_ response: APIResponse) throws {
        try validateStatus(response)
    }

    /// ``makeRequest()``, with any error reported as ``CatenaError/Code/invalidRequest``
    /// naming this endpoint ("ListUsersEndpoint: page must be 1 or more, not 0").
    public func buildRequest() throws(CatenaError) -> APIRequest {
        do {
            return try makeRequest()
        } catch let error as CatenaError {
            throw error
        } catch {
            throw CatenaError(.invalidRequest, request: .placeholder, underlyingError: error, detail: "\(Self.self): \(error)")
        }
    }

    /// The default validation: 2xx passes; anything else throws `unacceptableStatus`
    /// carrying the response and, when it decodes, the API's error body.
    public func validateStatus(_ response: APIResponse, acceptable: Range<Int> = 200..<300) throws {
        guard !acceptable.contains(response.status.code) else { return }
        let body = try? JSONDecoder().decode(ErrorBody.self, from: response.body)
        throw CatenaError(.unacceptableStatus, request: response.request, response: response, underlyingError: body)
    }
}

/// Bad input to an endpoint: names the field and what is wrong with it.
public struct EndpointInputError: Error, Sendable, CustomStringConvertible {
    public let field: String
    public let problem: String

    public init(field: String, _ problem: String) {
        self.field = field
        self.problem = problem
    }

    public var description: String { "\(field) \(problem)" }
}

/// An endpoint whose content is JSON.
public protocol JSONEndpoint: Endpoint where Content: Decodable {
    /// A decoder for this endpoint only; nil (the default) uses the client's.
    var decoder: JSONDecoder? { get }
}

extension JSONEndpoint {
    public var decoder: JSONDecoder? { nil }

    public func content(from response: APIResponse, context: EndpointContext) throws -> Content {
        try response.decode(Content.self, decoder: decoder ?? context.decoder)
    }
}

/// An endpoint that produces no content: accepts 2xx (204 included) and any body.
public protocol VoidEndpoint: Endpoint where Content == Void {}

extension VoidEndpoint {
    public func content(from response: APIResponse, context: EndpointContext) throws {}
}

/// An endpoint whose content is the body's bytes.
public protocol DataEndpoint: Endpoint where Content == Data {}

extension DataEndpoint {
    public func content(from response: APIResponse, context: EndpointContext) throws -> Data { response.body }
}

/// An endpoint whose content is the body as text, in the charset its `Content-Type`
/// names (UTF-8 when it names none; also UTF-16, US-ASCII, ISO-8859-1 and
/// windows-1252). A body in a charset Catena does not know is read as UTF-8 when it is
/// valid UTF-8 (plain ASCII is, in every such charset); otherwise, and for bytes that
/// are not text in the named charset, it fails with ``CatenaError/Code/decodingFailed``
/// naming the charset.
public protocol StringEndpoint: Endpoint where Content == String {}

extension StringEndpoint {
    public func content(from response: APIResponse, context: EndpointContext) throws -> String {
        let charset = response.headerFields[.contentType].flatMap(MediaType.init)?.charset ?? "utf-8"
        guard let encoding = MediaType.encoding(forCharset: charset) else {
            if let text = String(data: response.body, encoding: .utf8) { return text }
            throw CatenaError(
                .decodingFailed, request: response.request, response: response,
                detail: "the body's charset \"\(charset.prefix(64))\" is not one Catena decodes, and the body is not UTF-8")
        }
        guard let text = String(data: response.body, encoding: encoding) else {
            throw CatenaError(.decodingFailed, request: response.request, response: response, detail: "the body is not \(charset) text")
        }
        return text
    }
}

extension CatenaError {
    /// The API's error body this error carries, if it is of type `Body`.
    public func apiError<Body: APIErrorBody>(as type: Body.Type = Body.self) -> Body? {
        underlyingError as? Body
    }
}

// MARK: Request-building helpers

extension APIRequest {
    /// `GET` of a relative path, each component encoded on its own.
    public static func get(_ path: String..., query: [URLQueryItem] = []) throws(CatenaError) -> APIRequest {
        try APIRequest(.get, path: path, query: query)
    }

    /// `DELETE` of a relative path.
    public static func delete(_ path: String..., query: [URLQueryItem] = []) throws(CatenaError) -> APIRequest {
        try APIRequest(.delete, path: path, query: query)
    }

    /// `POST` of a body to a relative path.
    public static func post(_ path: String..., query: [URLQueryItem] = [], body: Body) throws(CatenaError) -> APIRequest {
        try APIRequest(.post, path: path, query: query, body: body)
    }

    /// `PUT` of a body to a relative path.
    public static func put(_ path: String..., query: [URLQueryItem] = [], body: Body) throws(CatenaError) -> APIRequest {
        try APIRequest(.put, path: path, query: query, body: body)
    }

    /// `PATCH` of a body to a relative path.
    public static func patch(_ path: String..., query: [URLQueryItem] = [], body: Body) throws(CatenaError) -> APIRequest {
        try APIRequest(.patch, path: path, query: query, body: body)
    }
}

extension Array where Element == URLQueryItem {
    /// Query items from pairs, leaving out those whose value is nil.
    public static func items(_ pairs: KeyValuePairs<String, String?>) -> [URLQueryItem] {
        pairs.compactMap { name, value in value.map { URLQueryItem(name: name, value: $0) } }
    }
}
