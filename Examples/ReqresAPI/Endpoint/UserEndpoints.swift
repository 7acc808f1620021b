public import Catena
import Foundation

/// `GET /api/users?page=N[&per_page=M]`: one page of the user list.
public struct ListUsersEndpoint: ReqresEndpoint, JSONEndpoint {
    public typealias Content = UserPage
    public let page: Int
    public let perPage: Int?

    public init(page: Int = 1, perPage: Int? = nil) {
        self.page = page
        self.perPage = perPage
    }

    public func makeRequest() throws -> APIRequest {
        guard page >= 1 else { throw EndpointInputError(field: "page", "must be 1 or more, not \(page)") }
        if let perPage, perPage < 1 { throw EndpointInputError(field: "perPage", "must be 1 or more, not \(perPage)") }
        return try .get("api", "users", query: .items(["page": String(page), "per_page": perPage.map(String.init)]))
    }
}

/// `GET /api/users/{id}`: one user.
public struct UserEndpoint: ReqresEndpoint, JSONEndpoint {
    public typealias Content = User
    public let id: Int

    public init(id: Int) { self.id = id }

    public func makeRequest() throws -> APIRequest {
        guard id >= 1 else { throw EndpointInputError(field: "id", "must be 1 or more, not \(id)") }
        return try .get("api", "users", String(id))
    }

    public func content(from response: APIResponse, context: EndpointContext) throws -> User {
        try response.decode(SingleUser.self, decoder: context.decoder).data
    }
}

/// `POST /api/users`: creates a user (201).
public struct CreateUserEndpoint: ReqresEndpoint, JSONEndpoint {
    public typealias Content = CreatedUser
    public let fields: UserFields

    public init(_ fields: UserFields) { self.fields = fields }

    public func makeRequest() throws -> APIRequest {
        guard fields.name?.isEmpty == false else { throw EndpointInputError(field: "name", "must not be empty") }
        return try .post("api", "users", body: .json(fields))
    }
}

/// `PUT /api/users/{id}` (replace) or `PATCH` (change some fields).
public struct UpdateUserEndpoint: ReqresEndpoint, JSONEndpoint {
    public typealias Content = UpdatedUser
    public let id: Int
    public let fields: UserFields
    public let replace: Bool

    public init(id: Int, fields: UserFields, replace: Bool = false) {
        self.id = id
        self.fields = fields
        self.replace = replace
    }

    public func makeRequest() throws -> APIRequest {
        guard id >= 1 else { throw EndpointInputError(field: "id", "must be 1 or more, not \(id)") }
        return replace ? try .put("api", "users", String(id), body: .json(fields)) : try .patch("api", "users", String(id), body: .json(fields))
    }
}

/// `DELETE /api/users/{id}` (204).
public struct DeleteUserEndpoint: ReqresEndpoint, VoidEndpoint {
    public let id: Int

    public init(id: Int) { self.id = id }

    public func makeRequest() throws -> APIRequest {
        guard id >= 1 else { throw EndpointInputError(field: "id", "must be 1 or more, not \(id)") }
        return try .delete("api", "users", String(id))
    }
}

/// `POST /api/login`: a token for a known user (400 `{"error": "Missing password"}`).
public struct LoginEndpoint: ReqresEndpoint, JSONEndpoint {
    public typealias Content = LoginToken
    public let credentials: Credentials

    public init(email: String, password: String?) { credentials = Credentials(email: email, password: password) }

    public func makeRequest() throws -> APIRequest {
        try .post("api", "login", body: .json(credentials))
    }
}

/// `POST /api/register`: an id and a token for a defined user.
public struct RegisterEndpoint: ReqresEndpoint, JSONEndpoint {
    public typealias Content = Registration
    public let credentials: Credentials

    public init(email: String, password: String?) { credentials = Credentials(email: email, password: password) }

    public func makeRequest() throws -> APIRequest {
        try .post("api", "register", body: .json(credentials))
    }
}
