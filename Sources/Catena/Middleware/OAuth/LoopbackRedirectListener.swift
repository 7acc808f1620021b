#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
public import Foundation

/// Receives one OAuth redirect on the loopback interface (RFC 8252 §7.3): listens on
/// 127.0.0.1 on a port the system picks, answers the browser's one redirect with a
/// short page, and closes. Register ``redirectURI`` (or `http://127.0.0.1` with any
/// port, as RFC 8252 §7.3 lets servers allow) as the client's redirect URI.
///
/// Only the address 127.0.0.1 is bound, never all interfaces. Any local process, or a
/// web page, can reach the port: requests for another path, without `code` or `error`,
/// or with another `state` than the one expected, are answered 404 and the listener goes
/// on waiting, and a connection gets 2 s to send its request. ``OAuth2Client/exchange(_:for:)``
/// checks the `state` again.
public final class LoopbackRedirectListener: Sendable {
    /// `http://127.0.0.1:PORT/PATH`: the redirect URI to register and send.
    public let redirectURI: URL
    private let listeningSocket: Int32
    private let path: String
    private let port: UInt16

    private struct State: Sendable {
        var waiter: CheckedContinuation<URL, any Error>?
        /// Whether the accept loop runs: then it alone closes the socket, when it ends.
        var running = false
        var stopped = false
        var socketClosed = false
    }
    private let state = Locked(State())

    /// Opens the listening socket.
    ///
    /// - Parameters:
    ///   - port: the port to listen on; 0 (the default) takes a free one, as RFC 8252
    ///     §7.3 lets a client do. Give a fixed one for providers that compare redirect
    ///     URIs exactly, port included (and register `http://127.0.0.1:PORT/PATH`).
    ///   - path: the redirect URI's path.
    public init(port: UInt16 = 0, path: String = "/callback") throws(CatenaError) {
        let path = path.hasPrefix("/") ? path : "/" + path
        func failure(_ what: String) -> CatenaError {
            CatenaError(
                .invalidRequest, request: APIRequest(url: URL(string: "http://127.0.0.1/")!),
                detail: "cannot listen on 127.0.0.1: \(what) failed (errno \(errno))")
        }
        #if canImport(Darwin)
        let fd = Darwin.socket(AF_INET, SOCK_STREAM, 0)
        #elseif canImport(Glibc)
        let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let fd = Musl.socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw failure("socket") }
        // A fixed port is taken again at once after the last sign-in's connections close.
        var reuse: Int32 = 1
        if port != 0 { _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size)) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        #if canImport(Darwin)
        address.sin_len = UInt8(MemoryLayout<sockaddr_in>.size)
        #endif
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                bind(fd, socketAddress, length) == 0 && listen(fd, 8) == 0 && getsockname(fd, socketAddress, &length) == 0
            }
        }
        // Non-blocking: an `accept` after `poll` never waits for a connection that went away.
        guard bound, fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0 else {
            let error = port != 0 && errno == EADDRINUSE ? failure("binding port \(port), which is in use,") : failure("bind")
            _ = Self.closeSocket(fd)
            throw error
        }
        self.listeningSocket = fd
        self.path = path
        self.port = UInt16(bigEndian: address.sin_port)
        self.redirectURI = URL(string: "http://127.0.0.1:\(self.port)\(path)")!
    }

    deinit {
        close()
    }

    /// Waits for the redirect and returns its full URL. Fails with
    /// ``CatenaError/Code/timedOut`` after `timeout`, and with
    /// ``CatenaError/Code/cancelled`` when the calling task is cancelled or the
    /// listener closed; call it once.
    ///
    /// - Parameters:
    ///   - timeout: how long the user may take.
    ///   - expected: the authorization request's `state`: a request carrying another is
    ///     not the redirect, so a stray one cannot end the sign-in.
    public func redirect(timeout: Duration = .seconds(300), expectingState expected: String? = nil) async throws(CatenaError) -> URL {
        let request = APIRequest(url: redirectURI)
        do {
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (waiter: CheckedContinuation<URL, any Error>) in
                    let starts = state.withLock { state -> Bool in
                        guard !state.stopped, !Task.isCancelled, state.waiter == nil, !state.running else { return false }
                        state.waiter = waiter
                        state.running = true
                        return true
                    }
                    guard starts else { return waiter.resume(throwing: CancellationError()) }
                    let deadline = ContinuousClock.now + timeout
                    DispatchQueue(label: "catena.loopback-redirect").async { self.acceptLoop(until: deadline, state: expected) }
                }
            } onCancel: {
                stop()
            }
        } catch let error as CatenaError {
            throw error
        } catch {
            throw CatenaError(.cancelled, request: request, detail: "stopped waiting for the redirect")
        }
    }

    /// Stops waiting and closes the socket (a wait in progress fails with ``CatenaError/Code/cancelled``).
    public func close() {
        stop()
    }

    private func stop() {
        let closeNow = state.withLock { state -> Bool in
            state.stopped = true
            guard !state.running, !state.socketClosed else { return false }
            state.socketClosed = true
            return true
        }
        if closeNow { _ = Self.closeSocket(listeningSocket) }
    }

    /// Runs on its own queue: polls in steps of 100 ms, so that a stop is seen soon.
    private func acceptLoop(until deadline: ContinuousClock.Instant, state expected: String?) {
        var outcome: Result<URL, any Error> = .failure(CancellationError())
        while true {
            if state.withLock({ $0.stopped }) { break }
            if ContinuousClock.now >= deadline {
                outcome = .failure(CatenaError(.timedOut, request: APIRequest(url: redirectURI), detail: "no redirect arrived in time"))
                break
            }
            var ready = pollfd(fd: listeningSocket, events: Int16(POLLIN), revents: 0)
            guard poll(&ready, 1, 100) > 0 else { continue }
            let client = accept(listeningSocket, nil, nil)
            guard client >= 0 else {
                // Out of descriptors, say: the socket stays readable, so wait rather than spin.
                if errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED { usleep(100_000) }
                continue
            }
            if let url = serve(client, state: expected) {
                outcome = .success(url)
                break
            }
        }
        let waiter = state.withLock { state -> CheckedContinuation<URL, any Error>? in
            state.running = false
            state.stopped = true
            state.socketClosed = true
            defer { state.waiter = nil }
            return state.waiter
        }
        _ = Self.closeSocket(listeningSocket)
        waiter?.resume(with: outcome)
    }

    /// Reads one request from `client`, answers it and closes it; the redirect's URL
    /// when it was the redirect.
    private func serve(_ client: Int32, state expected: String?) -> URL? {
        defer { _ = Self.closeSocket(client) }
        _ = fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK)
        #if canImport(Darwin)
        var one: Int32 = 1
        _ = setsockopt(client, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
        // The request head, at most 16 KiB (a redirect is one line of a few hundred bytes),
        // within 2 s: a connection that trickles cannot hold the listener.
        let deadline = ContinuousClock.now + .seconds(2)
        var head: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while head.count < 16 * 1024, !head.suffix(4).elementsEqual([13, 10, 13, 10]), !state.withLock({ $0.stopped }) {
            let left = deadline - ContinuousClock.now
            guard left > .zero else { break }
            var readable = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
            guard poll(&readable, 1, Int32(min(100, max(1, left.seconds * 1000)))) > 0 else { continue }
            let count = buffer.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count, 0) }
            if count < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { continue }
            guard count > 0 else { break }
            head += buffer[..<count]
        }
        let line = head.prefix { $0 != 13 && $0 != 10 }
        let parts = line.split(separator: UInt8(ascii: " "))
        guard parts.count == 3, parts[0].elementsEqual("GET".utf8), let target = String(bytes: parts[1], encoding: .utf8),
            target.hasPrefix(path), let url = URL(string: "http://127.0.0.1:\(port)\(target)"),
            let items = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems,
            url.path == path, items.contains(where: { $0.name == "code" || $0.name == "error" }),
            expected.map({ expected in items.contains { $0.name == "state" && $0.value == expected } }) ?? true
        else {
            respond(client, status: "404 Not Found", body: "Not found.")
            return nil
        }
        // Nothing of the request is echoed: the page cannot carry what a hostile link put there.
        respond(client, status: "200 OK", body: "Signed in. You can close this window and go back to the application.")
        return url
    }

    private func respond(_ client: Int32, status: String, body: String) {
        let page = "<!doctype html><meta charset=utf-8><title>\(body)</title><p>\(body)"
        let answer = Array(
            ("HTTP/1.1 \(status)\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: \(page.utf8.count)\r\n"
                + "Cache-Control: no-store\r\nConnection: close\r\n\r\n\(page)").utf8)
        var sent = 0
        while sent < answer.count {
            #if canImport(Darwin)
            let count = answer[sent...].withUnsafeBytes { send(client, $0.baseAddress, $0.count, 0) }
            #else
            let count = answer[sent...].withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            #endif
            guard count > 0 else { return }
            sent += count
        }
    }

    private static func closeSocket(_ fd: Int32) -> Int32 {
        #if canImport(Darwin)
        Darwin.close(fd)
        #elseif canImport(Musl)
        Musl.close(fd)
        #else
        Glibc.close(fd)
        #endif
    }
}
