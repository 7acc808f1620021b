import CatenaDemoServer
import Foundation
import Testing
@testable import Catena
@testable import CatenaAsyncHTTPClient
@testable import CatenaTestSupport

/// What sending costs when the server does not keep up.
@Suite("WebSocket sends against a server that stops reading", .serialized, .timeLimit(.minutes(3)))
struct WebSocketSendingTests {
    @Test("a send after the connection ended fails, though the socket still looks writable")
    func sendAfterEnd() async throws {
        let server = try await FaultServer.running()
        var options = WebSocketOptions()
        // The first message fills the buffer, and nobody reads it: the socket's reading
        // side waits there and never sees the close or the end that follow.
        options.bufferedBytes = 1
        let socket = try await AsyncHTTPClientTransport().webSocket(
            APIRequest(url: server.baseURL.appending(path: MisbehavingServer.WebSocketFault.burst.rawValue)), options: options)
        var failure: CatenaError?
        for _ in 0..<500 where failure == nil {
            do { try await socket.send(text: "anyone?") } catch { failure = error }
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(failure?.code == .connectionLost, "every send to a closed connection returned")
        await socket.close()
    }

    @Test("a sender to a server that reads nothing stalls once the connection's buffers are full")
    func senderStalls() async throws {
        let server = try await FaultServer.running()
        var request = APIRequest(url: server.baseURL.appending(path: MisbehavingServer.WebSocketFault.unread.rawValue))
        request[option: RequestTimeout.self] = .seconds(10)
        var options = WebSocketOptions()
        options.closeTimeout = .milliseconds(200)
        let socket = try await AsyncHTTPClientTransport().webSocket(request, options: options)
        let sent = Locked(0)
        let message = Data(repeating: 0x5A, count: 1024)
        // 64 MiB if nothing held it back: far more than loopback's buffers take. The
        // sender says how it ended: nil after every send, else the send's error.
        let sender = Task { () -> CatenaError? in
            for _ in 0..<65_536 {
                do throws(CatenaError) { try await socket.send(data: message) } catch { return error }
                sent.withLock { $0 += 1 }
            }
            return nil
        }
        // Stalled: no send completes for half a second.
        var last = -1
        var quiet = 0
        while quiet < 5, sent.withLock({ $0 }) < 65_536 {
            try await Task.sleep(for: .milliseconds(100))
            let now = sent.withLock { $0 }
            quiet = now == last ? quiet + 1 : 0
            last = now
        }
        let stalledAt = sent.withLock { $0 }
        #expect(stalledAt < 65_536, "every send returned: nothing waited for the connection")
        #expect(stalledAt * 1024 < 32 << 20, "\(stalledAt) KiB went out before the sender stalled")
        // Still inside a send, not ended by an error: the wait is the connection's.
        #expect(socket.closeStatus == nil)
        await socket.close()
        // Closing fails the stalled write: the sender ends with that failure.
        let ending = await sender.value
        #expect(ending?.code == .connectionLost, "the sender ended with \(String(describing: ending))")
    }
}
