#if DemoServer
import Catena
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// The server side of `Idempotency-Key` (IETF httpapi draft), as a payments API keeps
/// it: `POST /api/orders` with a key creates an order once.
///
/// - A new key: the order is made and its answer (201) stored under the key.
/// - The key again with the same body: the stored answer, with `Idempotent-Replayed: true`.
/// - The key again with another body: 422. While the first is still in progress: 409.
/// - No key: 400, since the resource requires one.
///
/// `?work=SECONDS` keeps a new key in progress that long before the order is made;
/// `?hold=SECONDS` holds its answer back after the order is made, so that a client's
/// timeout falls between the effect and the answer (each at most 30).
/// `GET /api/orders/count?item=NAME` says how many orders name that item.
enum IdempotencyRoutes {
    private enum Entry {
        case inProgress(body: ByteBuffer)
        case done(body: ByteBuffer, answer: ByteBuffer)
    }

    /// Keys kept at most; the oldest go first (a real server expires them after a day).
    static let keptKeys = 10_000
    /// Orders kept for counting at most; the oldest go first.
    static let keptOrders = 100_000

    static func add(to router: Router<DemoRoutes.Context>) {
        let api = router.group("api")
        let keys = Locked<(entries: [String: Entry], order: [String])>(([:], []))
        let orders = Locked<(made: Int, items: [String])>((0, []))

        api.post("orders") { request, _ in
            guard let key = request.headers[.idempotencyKey], !key.isEmpty else {
                return DemoRoutes.apiError("this resource requires an Idempotency-Key", status: .badRequest)
            }
            let work = try number(request.uri.queryParameters.get("work"), named: "work", in: 0...30, default: 0)
            let hold = try number(request.uri.queryParameters.get("hold"), named: "hold", in: 0...30, default: 0)
            let body = try await request.body.collect(upTo: 1 << 16)
            enum Seen { case new, replay(ByteBuffer), conflict, mismatch }
            let seen = keys.withLock { keys -> Seen in
                switch keys.entries[key] {
                case nil:
                    keys.entries[key] = .inProgress(body: body)
                    keys.order.append(key)
                    if keys.order.count > keptKeys { keys.entries[keys.order.removeFirst()] = nil }
                    return .new
                case .inProgress: return .conflict
                case .done(let stored, _) where stored != body: return .mismatch
                case .done(_, let answer): return .replay(answer)
                }
            }
            switch seen {
            case .conflict:
                return DemoRoutes.apiError("a request with this Idempotency-Key is still in progress", status: .conflict)
            case .mismatch:
                return DemoRoutes.apiError("this Idempotency-Key was used with another body", status: .unprocessableContent)
            case .replay(let answer):
                return Response(
                    status: .created,
                    headers: [.contentType: "application/json; charset=utf-8", HTTPField.Name("Idempotent-Replayed")!: "true"],
                    body: .init(byteBuffer: answer))
            case .new:
                break
            }
            if work > 0 {
                do {
                    try await Task.sleep(for: .seconds(work))
                } catch {
                    // Nothing was made (the client left and the handler was cancelled):
                    // the key is free again, rather than "in progress" forever.
                    keys.withLock { _ = $0.entries.removeValue(forKey: key) }
                    throw error
                }
            }
            let item = (try? JSONDecoder().decode([String: String].self, from: body))?["item"] ?? ""
            let id = orders.withLock { orders in
                orders.made += 1
                orders.items.append(item)
                if orders.items.count > keptOrders { orders.items.removeFirst(orders.items.count - keptOrders) }
                return orders.made
            }
            let answer = try DemoRoutes.jsonBuffer(["id": "\(id)", "item": item])
            // Stored unless the key was evicted meanwhile (it would come back outside the bound).
            keys.withLock { keys in
                if keys.entries[key] != nil { keys.entries[key] = .done(body: body, answer: answer) }
            }
            if hold > 0 { try await Task.sleep(for: .seconds(hold)) }
            return Response(status: .created, headers: [.contentType: "application/json; charset=utf-8"], body: .init(byteBuffer: answer))
        }

        api.get("orders/count") { request, _ in
            let item = request.uri.queryParameters.get("item") ?? ""
            let count = orders.withLock { $0.items.filter { $0 == item }.count }
            return DemoRoutes.rawJSON(#"{"count":\#(count)}"#, status: .ok)
        }
    }
}
#endif  // DemoServer
