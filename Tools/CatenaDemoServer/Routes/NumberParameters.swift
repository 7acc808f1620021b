#if DemoServer
import Hummingbird

/// A number in a request that is not one the demo server can use: answered with 400
/// and a message, never by trapping (`nan`, `inf`, `1e308` and huge integers arrive
/// from tests and from anyone who can reach `catena serve`).
struct BadNumber: HTTPResponseError {
    let name: String
    let text: String
    let range: ClosedRange<Double>

    var status: HTTPResponse.Status { .badRequest }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        let message =
            #"{"error":"\#(name) must be a number in \#(range.lowerBound)...\#(range.upperBound), not \#(text.prefix(40).filter { $0 != "\"" && $0 != "\\" })"}"#
        return Response(status: .badRequest, headers: [.contentType: "application/json"], body: .init(byteBuffer: .init(string: message)))
    }
}

/// Reads an optional finite number in `range`; `fallback` when absent.
func number(_ text: String?, named name: String, in range: ClosedRange<Double>, default fallback: Double) throws -> Double {
    guard let text else { return fallback }
    guard let value = Double(text), value.isFinite, range.contains(value) else {
        throw BadNumber(name: name, text: text, range: range)
    }
    return value
}

/// Reads an optional whole number in `range`; `fallback` when absent.
func wholeNumber(_ text: String?, named name: String, in range: ClosedRange<Int>, default fallback: Int) throws -> Int {
    guard let text else { return fallback }
    guard let value = Int(text), range.contains(value) else {
        throw BadNumber(name: name, text: text, range: Double(range.lowerBound)...Double(range.upperBound))
    }
    return value
}
#endif  // DemoServer
