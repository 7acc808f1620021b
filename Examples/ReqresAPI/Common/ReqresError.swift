public import Catena

/// reqres's error body: `{"error": "Missing password"}`.
public struct ReqresError: APIErrorBody, Equatable {
    public let error: String

    public init(error: String) { self.error = error }
}

/// What every reqres endpoint shares: its error body.
public protocol ReqresEndpoint: Endpoint where ErrorBody == ReqresError {}
