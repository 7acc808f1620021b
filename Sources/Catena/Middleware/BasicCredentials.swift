import Foundation

/// A user name and password for HTTP Basic authentication (a server's, or a proxy's).
/// Also a ``RequestOption``: a request that sets it uses these credentials.
///
/// Its `description`, `debugDescription` and mirror (what `print`, `dump`, string
/// interpolation and debuggers show) name the user only, never the password.
public struct BasicCredentials: Sendable, RequestOption, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var user: String
    public var password: String

    public init(user: String, password: String) {
        self.user = user
        self.password = password
    }

    /// "Basic base64(user:password)"
    public var headerValue: String {
        "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
    }

    public static let defaultValue: BasicCredentials? = nil

    /// "BasicCredentials(user: ann, password: <redacted>)".
    public var description: String {
        "BasicCredentials(user: \(ProblemDetails.printable(user, limit: 200)), password: \(Redaction.placeholder))"
    }

    public var debugDescription: String { description }

    /// The user only: `dump` and debuggers walk the mirror, not `description`.
    public var customMirror: Mirror {
        Mirror(self, children: ["user": user, "password": Redaction.placeholder], displayStyle: .struct)
    }
}
