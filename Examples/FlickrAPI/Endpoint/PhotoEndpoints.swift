import Catena
public import Foundation

/// `flickr.photos.getRecent`: the latest public photos, a page at a time.
public struct GetRecentEndpoint: FlickrEndpoint {
    public typealias Content = RecentPhotos
    public let perPage: Int
    public let page: Int

    public init(perPage: Int = 100, page: Int = 1) {
        self.perPage = perPage
        self.page = page
    }

    public var method: String { "flickr.photos.getRecent" }

    public func parameters() throws -> [URLQueryItem] {
        guard (1...500).contains(perPage) else { throw EndpointInputError(field: "perPage", "must be 1...500, not \(perPage)") }
        guard page >= 1 else { throw EndpointInputError(field: "page", "must be 1 or more, not \(page)") }
        return .items(["per_page": String(perPage), "page": String(page)])
    }
}

/// `flickr.photos.getSizes`: the sizes one photo is available in.
public struct GetSizesEndpoint: FlickrEndpoint {
    public typealias Content = PhotoSizes
    public let photoID: String

    public init(photoID: String) { self.photoID = photoID }

    public var method: String { "flickr.photos.getSizes" }

    public func parameters() throws -> [URLQueryItem] {
        guard !photoID.isEmpty else { throw EndpointInputError(field: "photoID", "must not be empty") }
        return .items(["photo_id": photoID])
    }
}
