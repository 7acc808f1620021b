public import Catena

/// `flickr.photos.getRecent`'s answer: `{"photos": {...}, "stat": "ok"}`.
public struct RecentPhotos: Codable, Sendable, Hashable {
    public let photos: PhotoPage
}

/// One page of photos.
public struct PhotoPage: Codable, Sendable, Hashable {
    public let page: Int
    public let pages: Int
    public let perpage: Int
    public let total: Int
    public let photo: [Photo]
}

/// A photo as Flickr lists it.
public struct Photo: Codable, Sendable, Hashable, Identifiable {
    public let id: String
    public let owner: String
    public let secret: String
    public let server: String
    public let farm: Int
    public let title: String
    public let ispublic: Int
    public let isfriend: Int
    public let isfamily: Int

    /// The photo's image URL on Flickr's static host, built from its parts.
    /// `suffix` is a size letter ("b" for large 1024, "z" for medium 640, …).
    public func imageURL(suffix: String = "b") -> String {
        "https://live.staticflickr.com/\(server)/\(id)_\(secret)_\(suffix).jpg"
    }
}

/// `flickr.photos.getSizes`'s answer: `{"sizes": {...}, "stat": "ok"}`.
public struct PhotoSizes: Codable, Sendable, Hashable {
    public let sizes: Sizes

    public struct Sizes: Codable, Sendable, Hashable {
        public let canblog: Int
        public let canprint: Int
        public let candownload: Int
        public let size: [Size]
    }

    /// One available size.
    public struct Size: Codable, Sendable, Hashable {
        public let label: String
        public let width: Int
        public let height: Int
        public let source: String
        public let url: String
        public let media: String
    }

    /// The largest size, by area.
    public var largest: Size? { sizes.size.max { $0.width * $0.height < $1.width * $1.height } }
}

/// Flickr pages by `page` / `pages`: a ``Catena/ContentLoader`` can append them.
extension RecentPhotos: PagedContent {
    public var items: [Photo] { photos.photo }
    public var pageNumber: Int { photos.page }
    public var pageCount: Int { photos.pages }
}
