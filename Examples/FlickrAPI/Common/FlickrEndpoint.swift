public import Catena
public import Foundation

/// Flickr's error body, which it sends with status 200: `{"stat": "fail", "code": 1, "message": "..."}`.
public struct FlickrError: APIErrorBody, Equatable, CustomStringConvertible {
    public let stat: String
    public let code: Int
    public let message: String

    public var description: String { "Flickr error \(code): \(message)" }
}

/// What every Flickr REST endpoint shares: the `/services/rest/` path, JSON without a
/// callback, and errors reported inside a 200.
public protocol FlickrEndpoint: JSONEndpoint where ErrorBody == FlickrError {
    /// The API method, such as "flickr.photos.getRecent".
    var method: String { get }
    /// The method's own parameters; throw ``EndpointInputError`` for bad input.
    func parameters() throws -> [URLQueryItem]
}

extension FlickrEndpoint {
    /// `GET /services/rest/?method=…&…&format=json&nojsoncallback=1`
    public func makeRequest() throws -> APIRequest {
        var request = try APIRequest.get(
            "services", "rest",
            query: [URLQueryItem(name: "method", value: method)] + (try parameters())
                + .items(["format": "json", "nojsoncallback": "1"]))
        request.appendTrailingSlash()
        return request
    }

    /// HTTP errors as usual; then `"stat": "fail"` becomes ``CatenaError/Code/apiFailure``
    /// carrying the ``FlickrError``.
    public func validate(_ response: APIResponse) throws {
        try validateStatus(response)
        let status = try response.decode(FlickrStatus.self)
        guard status.stat == "ok" else {
            let error = try? JSONDecoder().decode(FlickrError.self, from: response.body)
            throw CatenaError(
                .apiFailure, request: response.request, response: response, underlyingError: error,
                detail: error?.description ?? "stat \"\(status.stat)\"")
        }
    }
}

/// The `stat` every Flickr answer carries.
struct FlickrStatus: Decodable {
    let stat: String
}
