public import Catena
import Foundation

/// Requests of the reqres.in users API, relative to the server: put an
/// `ApplyEnvironment` loader in the chain to say which server.
public enum ReqresRequests {
    /// `GET /api/users?page=N[&per_page=M]`
    public static func listUsers(page: Int = 1, perPage: Int? = nil) throws(CatenaError) -> APIRequest {
        var query = [URLQueryItem(name: "page", value: String(page))]
        if let perPage { query.append(URLQueryItem(name: "per_page", value: String(perPage))) }
        return try APIRequest(.get, path: ["api", "users"], query: query)
    }

    /// `GET /api/users/{id}`
    public static func user(id: Int) throws(CatenaError) -> APIRequest {
        try APIRequest(.get, path: ["api", "users", String(id)])
    }
}
