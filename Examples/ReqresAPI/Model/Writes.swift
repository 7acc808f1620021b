/// What `POST /api/users` and `PUT`/`PATCH /api/users/{id}` send.
public struct UserFields: Codable, Sendable, Hashable {
    public var name: String?
    public var job: String?

    public init(name: String? = nil, job: String? = nil) {
        self.name = name
        self.job = job
    }
}

/// What `POST /api/users` answers (201).
public struct CreatedUser: Codable, Sendable, Hashable {
    public let id: String
    public let name: String?
    public let job: String?
    public let createdAt: String
}

/// What `PUT`/`PATCH /api/users/{id}` answer.
public struct UpdatedUser: Codable, Sendable, Hashable {
    public let name: String?
    public let job: String?
    public let updatedAt: String
}

/// What `POST /api/login` and `POST /api/register` send.
public struct Credentials: Codable, Sendable, Hashable {
    public var email: String
    public var password: String?

    public init(email: String, password: String?) {
        self.email = email
        self.password = password
    }
}

/// What `POST /api/login` answers.
public struct LoginToken: Codable, Sendable, Hashable {
    public let token: String
}

/// What `POST /api/register` answers.
public struct Registration: Codable, Sendable, Hashable {
    public let id: Int
    public let token: String
}
