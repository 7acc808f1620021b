#if DemoServer
import Catena
import Foundation
import Hummingbird
import HummingbirdWebSocket
import NIOCore

/// The demo server's WebSockets (Hummingbird's WebSocket upgrade, on plain HTTP/1.1 and
/// on TLS without HTTP/2):
/// - `/ws/echo` sends every message back;
/// - `/ws/protected/echo` does too, for a live bearer token from `/oauth/token` (else
///   401 with a Bearer challenge);
/// - `/ws/ticker?n=N&ms=M` pushes N price ticks as JSON, M milliseconds before each,
///   then closes with 1000;
/// - `/ws/flood?n=N&size=S` pushes N binary messages (at most 100,000) of S bytes as
///   fast as the connection takes them, then closes with 1000 (for a slow reader's
///   memory);
/// - `/ws/rooms/NAME` is a chat room: each text message goes to every member, the
///   sender too.
enum WebSocketRoutes {
    typealias Context = BasicWebSocketRequestContext

    /// The most a message may hold here.
    static let maximumMessageSize = 1 << 20

    static func makeRouter(isLiveToken: @escaping @Sendable (String) -> Bool) -> Router<Context> {
        let router = Router(context: Context.self)
        let rooms = Rooms()
        router.ws("ws/echo") { inbound, outbound, _ in
            try await echo(inbound, outbound)
        }
        router.ws("ws/protected/echo") { request, _ in
            let token = request.headers[.authorization].flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil }
            guard let token, isLiveToken(token) else {
                throw HTTPError(.unauthorized, headers: [.wwwAuthenticate: #"Bearer error="invalid_token""#])
            }
            return .upgrade([:])
        } onUpgrade: { inbound, outbound, _ in
            try await echo(inbound, outbound)
        }
        router.ws("ws/ticker") { inbound, outbound, context in
            let query = context.request.uri.queryParameters
            let count = min(max(query.get("n", as: Int.self) ?? 10, 0), 100_000)
            let pause = min(max(query.get("ms", as: Int.self) ?? 100, 0), 10_000)
            // With ms=0 the whole feed and its close can come in the 101's read.
            var price = 100.0
            for sequence in 0..<count {
                price += Double((sequence * 7919) % 11 - 5) / 100
                if pause > 0 { try await Task.sleep(for: .milliseconds(pause)) }
                try await outbound.write(.text(#"{"seq":\#(sequence),"symbol":"CTN","price":\#((price * 100).rounded() / 100)}"#))
            }
            try await outbound.close(.normalClosure, reason: "end of feed")
            _ = inbound
        }
        router.ws("ws/flood") { inbound, outbound, context in
            let query = context.request.uri.queryParameters
            let count = min(max(query.get("n", as: Int.self) ?? 100, 0), 100_000)
            let size = min(max(query.get("size", as: Int.self) ?? 1024, 0), maximumMessageSize)
            let payload = ByteBuffer(repeating: 0x2A, count: size)
            // Each write waits while the connection is not writable: a slow reader
            // slows this loop instead of filling the server's memory. A client that
            // leaves fails the next write.
            for _ in 0..<count { try await outbound.write(.binary(payload)) }
            try await outbound.close(.normalClosure, reason: "end of flood")
            _ = inbound
        }
        router.ws("ws/rooms/{name}") { inbound, outbound, context in
            let name = context.requestContext.parameters.get("name") ?? ""
            let member = rooms.join(name, outbound)
            defer { rooms.leave(name, member) }
            for try await message in inbound.messages(maxSize: maximumMessageSize) {
                guard case .text(let text) = message else { continue }
                for other in rooms.members(of: name) { try? await other.write(.text(text)) }
            }
        }
        return router
    }

    private static func echo(_ inbound: WebSocketInboundStream, _ outbound: WebSocketOutboundWriter) async throws {
        for try await message in inbound.messages(maxSize: maximumMessageSize) {
            switch message {
            case .text(let text): try await outbound.write(.text(text))
            case .binary(let data): try await outbound.write(.binary(data))
            }
        }
    }

    /// The chat rooms' members, by room.
    final class Rooms: Sendable {
        private let members = Locked<[String: [UUID: WebSocketOutboundWriter]]>([:])

        func join(_ room: String, _ writer: WebSocketOutboundWriter) -> UUID {
            let id = UUID()
            members.withLock { $0[room, default: [:]][id] = writer }
            return id
        }

        func leave(_ room: String, _ id: UUID) {
            members.withLock { $0[room]?[id] = nil }
        }

        func members(of room: String) -> [WebSocketOutboundWriter] {
            members.withLock { Array(($0[room] ?? [:]).values) }
        }
    }
}
#endif  // DemoServer
