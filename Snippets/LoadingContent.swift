// The content loader: fetched content and its loading state, on the main actor.
// Runs against the embedded demo server: `swift run --enable-all-traits LoadingContent`.

// snippet.hide
import CatenaDemoServer

let server = try await DemoServer.start()
let environment = ServerEnvironment(scheme: "http", host: "127.0.0.1", port: server.port)
// snippet.show
import Catena
import CatenaAsyncHTTPClient

// snippet.setup
struct User: Decodable, Sendable {
    let id: Int
    let email: String
}

struct UserPage: Decodable, PagedContent {
    let page: Int
    let totalPages: Int
    let data: [User]
    var items: [User] { data }
    var pageNumber: Int { page }
    var pageCount: Int { totalPages }
    enum CodingKeys: String, CodingKey {
        case page, data
        case totalPages = "total_pages"
    }
}

struct ListUsers: JSONEndpoint {
    typealias Content = UserPage
    let page: Int
    func makeRequest() throws -> APIRequest {
        try .get("api", "users", query: .items(["page": String(page), "per_page": "4"]))
    }
}

let client = Client(EnvironmentMiddleware(environment) --> AsyncHTTPClientTransport())
// snippet.end

// snippet.observe
let users = ContentLoader(client: client, pages: { ListUsers(page: $0) })
let token = users.observe { state in  // on the main actor; stops when the token goes
    switch state {
    case .initial: break
    case .loading(let shown): print("loading, showing \(shown?.items.count ?? 0)")
    case .success(let pages): print("\(pages.items.count) users, page \(pages.loadedPages) of \(pages.pageCount)")
    case .failure(let error, _): print(error)  // the users loaded before stay shown
    }
}
// snippet.end

// snippet.pages
// The next page, until the last; each call returns false while a load runs or when
// there is nothing more.
for await state in users.states {  // the same states as an AsyncSequence
    if state.error != nil { break }
    if !state.isLoading, users.startLoading() == false { break }
}
// snippet.end

// snippet.hide
token.cancel()
await server.stop()
