#if DemoServer
import Foundation

/// A user as reqres.in serves it (snake_case keys on the wire).
struct DemoUser: Codable, Sendable {
    let id: Int
    let email: String
    let first_name: String
    let last_name: String
    let avatar: String
}

/// The twelve users reqres.in serves, in its order: two pages of six.
enum UserStore {
    static let users: [DemoUser] = [
        ("George", "Bluth"), ("Janet", "Weaver"), ("Emma", "Wong"), ("Eve", "Holt"),
        ("Charles", "Morris"), ("Tracey", "Ramos"), ("Michael", "Lawson"), ("Lindsay", "Ferguson"),
        ("Tobias", "Funke"), ("Byron", "Fields"), ("George", "Edwards"), ("Rachel", "Howell"),
    ].enumerated().map { index, name in
        let id = index + 1
        return DemoUser(
            id: id,
            email: "\(name.0.lowercased()).\(name.1.lowercased())@reqres.in",
            first_name: name.0,
            last_name: name.1,
            avatar: "https://reqres.in/img/faces/\(id)-image.jpg")
    }

    static func user(id: Int) -> DemoUser? {
        users.indices.contains(id - 1) ? users[id - 1] : nil
    }

    static func user(email: String) -> DemoUser? {
        users.first { $0.email == email.lowercased() }
    }

    /// A token that depends only on the email, as reqres's fixed tokens do.
    static func token(for email: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in email.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return String(hash, radix: 36)
    }
}

struct Support: Encodable, Sendable {
    let url = "https://reqres.in"
    let text = "Catena's demo server: reqres.in's shapes, served locally."
}

struct UserPage: Encodable, Sendable {
    let page: Int
    let per_page: Int
    let total: Int
    let total_pages: Int
    let data: [DemoUser]
    let support: Support
}

struct SingleUser: Encodable, Sendable {
    let data: DemoUser
    let support: Support
}

struct Credentials: Decodable, Sendable {
    let email: String?
    let username: String?
    let password: String?
}
#endif  // DemoServer
