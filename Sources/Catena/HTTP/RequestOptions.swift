/// A typed key for a per-request setting that any loader in a chain can read or set.
///
/// Declare a type for the key and give it a default; the default is what every request
/// carries until someone sets the option.
///
/// ```swift
/// enum TraceID: RequestOption {
///     static let defaultValue: String? = nil
/// }
/// request[option: TraceID.self] = "abc"
/// ```
public protocol RequestOption {
    /// The type of the option's value.
    associatedtype Value: Sendable
    /// The value a request has until the option is set.
    static var defaultValue: Value { get }
}

/// The options a request carries, keyed by ``RequestOption`` types.
///
/// Storage is allocated only when an option is set, so a request without options costs
/// nothing extra.
public struct RequestOptions: Sendable {
    private var values: [ObjectIdentifier: any Sendable] = [:]

    /// Creates an empty set of options: every option has its default value.
    public init() {}

    /// The option's value, or its default when it was never set.
    public subscript<Option: RequestOption>(_ option: Option.Type) -> Option.Value {
        get {
            // Read several times by every call on its way down: an option that was never
            // set costs no dynamic cast.
            guard let value = values.isEmpty ? nil : values[ObjectIdentifier(option)] else { return Option.defaultValue }
            return value as? Option.Value ?? Option.defaultValue
        }
        set { values[ObjectIdentifier(option)] = newValue }
    }

    /// Whether the option was set explicitly (even to its default value).
    public func contains<Option: RequestOption>(_ option: Option.Type) -> Bool {
        values[ObjectIdentifier(option)] != nil
    }

    /// Removes an explicitly set value so the option reads its default again.
    public mutating func remove<Option: RequestOption>(_ option: Option.Type) {
        values[ObjectIdentifier(option)] = nil
    }
}

/// How long a request may take in total, from the moment the transport starts it until
/// its whole body has arrived. `nil` (the default) uses the transport's own timeout.
public enum RequestTimeout: RequestOption {
    public static let defaultValue: Duration? = nil
}

/// The largest response body a transport accepts before failing the request with
/// ``CatenaError/Code/invalidResponse``. The default is 64 MiB; raise it per request
/// for larger downloads.
public enum MaximumResponseSize: RequestOption {
    public static let defaultValue: Int = 64 * 1024 * 1024
}
