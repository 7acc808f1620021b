public import Catena

/// A user as the reqres.in API describes one.
public struct User: Codable, Sendable, Hashable, Identifiable {
    public let id: Int
    public let email: String
    public let firstName: String
    public let lastName: String
    public let avatar: String

    public init(id: Int, email: String, firstName: String, lastName: String, avatar: String) {
        self.id = id
        self.email = email
        self.firstName = firstName
        self.lastName = lastName
        self.avatar = avatar
    }

    enum CodingKeys: String, CodingKey {
        case id, email, avatar
        case firstName = "first_name"
        case lastName = "last_name"
    }
}

/// One page of the user list: `GET /api/users?page=N&per_page=M`.
public struct UserPage: Codable, Sendable, Hashable {
    public let page: Int
    public let perPage: Int
    public let total: Int
    public let totalPages: Int
    public let data: [User]

    enum CodingKeys: String, CodingKey {
        case page, total, data
        case perPage = "per_page"
        case totalPages = "total_pages"
    }
}

/// The envelope of `GET /api/users/{id}`.
public struct SingleUser: Codable, Sendable, Hashable {
    public let data: User
}

/// reqres pages by `page` / `total_pages`: a ``Catena/ContentLoader`` can append them.
extension UserPage: PagedContent {
    public var items: [User] { data }
    public var pageNumber: Int { page }
    public var pageCount: Int { totalPages }
}
