public import Foundation
public import HTTPTypes

/// A complete HTTP response: status, header fields, body bytes, and the request that
/// produced it.
public struct APIResponse: Sendable {
    /// The status code and reason phrase.
    public var status: HTTPResponse.Status
    /// The header fields.
    public var headerFields: HTTPFields
    /// The body, complete.
    public var body: Data
    /// The request as the transport sent it.
    public var request: APIRequest
    /// How long the exchange took, when it went over the network (nil from a mock or
    /// a cache hit).
    public var timing: ResponseTiming?

    /// Creates a response (transports and mocks use this).
    public init(status: HTTPResponse.Status, headerFields: HTTPFields = [:], body: Data = Data(), request: APIRequest) {
        self.status = status
        self.headerFields = headerFields
        self.body = body
        self.request = request
    }

    /// Returns this response when its status is in `acceptable`.
    ///
    /// - Throws: ``CatenaError/Code/unacceptableStatus`` carrying this response.
    @discardableResult
    public func validateStatus(_ acceptable: Range<Int> = 200..<300) throws(CatenaError) -> APIResponse {
        guard acceptable.contains(status.code) else {
            throw CatenaError(.unacceptableStatus, request: request, response: self)
        }
        return self
    }

    /// Decodes the body as JSON.
    ///
    /// - Throws: ``CatenaError/Code/decodingFailed`` naming the type and where in the
    ///   document decoding stopped; an empty body says so.
    public func decode<Value: Decodable>(_ type: Value.Type = Value.self, decoder: JSONDecoder = JSONDecoder()) throws(CatenaError) -> Value {
        guard !body.isEmpty else {
            throw CatenaError(.decodingFailed, request: request, response: self, detail: "expected \(Value.self) but the body is empty")
        }
        do {
            return try decoder.decode(Value.self, from: body)
        } catch {
            throw CatenaError(
                .decodingFailed, request: request, response: self, underlyingError: error,
                detail: "\(Value.self) from \(body.count) bytes of \(headerFields[.contentType] ?? "unknown content type")")
        }
    }
}
