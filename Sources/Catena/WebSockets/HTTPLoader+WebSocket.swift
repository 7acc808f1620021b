import Foundation

extension HTTPLoader {
    /// Opens a WebSocket: sends `request` as an upgrade down this chain, so the
    /// environment, auth (a 401 renews the token once, as for any call), cookies,
    /// logging, tracing and recordings see it, and returns the open socket once the
    /// server answers 101.
    ///
    /// `request` is a GET without a body; a `ws` or `wss` URL is read as `http` or
    /// `https`. The transport opens the connection with everything it honours for
    /// calls (trust roots, public-key pins, a client identity, proxies, a Unix socket,
    /// the request's timeout for the handshake). `AsyncHTTPClientTransport` opens
    /// WebSockets; URLSession on Linux cannot, and refuses.
    ///
    /// ```swift
    /// let socket = try await chain.webSocket(try APIRequest(urlString: "wss://feed.example.com/ticks"))
    /// ```
    ///
    /// - Throws: ``CatenaError/Code/unacceptableStatus`` when the server answers with
    ///   another status (the response, with up to 64 KiB of its body, is the error's);
    ///   ``CatenaError/Code/invalidResponse`` for a 101 that does not prove a WebSocket
    ///   (a wrong `Sec-WebSocket-Accept`), chooses a subprotocol not offered, or
    ///   answers with an extension that does not fit the offer (see
    ///   ``WebSocketOptions/compression``);
    ///   ``CatenaError/Code/invalidRequest`` for a request that cannot be an upgrade, or
    ///   a transport that cannot open WebSockets; and the transport's errors.
    public func webSocket(_ request: APIRequest, options: WebSocketOptions = WebSocketOptions()) async throws(CatenaError) -> WebSocket {
        var request = request
        switch request.scheme?.lowercased() {
        case "ws": request.scheme = "http"
        case "wss": request.scheme = "https"
        default: break
        }
        guard request.method == .get, request.body.isEmpty else {
            throw CatenaError(.invalidRequest, request: request, detail: "a WebSocket opens with a GET without a body, not a \(request.method.rawValue)")
        }
        guard options.maximumMessageSize > 0, options.bufferedBytes > 0 else {
            throw CatenaError(.invalidRequest, request: request, detail: "WebSocketOptions' maximumMessageSize and bufferedBytes must be positive")
        }
        if !options.subprotocols.isEmpty {
            // RFC 6455 section 4.1: each a token, none twice.
            let valid = options.subprotocols.allSatisfy { name in
                !name.isEmpty && name.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && !Self.separators.contains($0) }
            }
            guard valid, Set(options.subprotocols).count == options.subprotocols.count else {
                throw CatenaError(
                    .invalidRequest, request: request, detail: "each WebSocket subprotocol must be a distinct token (no spaces, commas or quotes)")
            }
            request.headerFields[.secWebSocketProtocol] = options.subprotocols.joined(separator: ", ")
        }
        // The extensions offered are Catena's to choose: none it cannot speak.
        request.headerFields[.secWebSocketExtensions] = options.compression.map(PerMessageDeflate.offer)
        let handoff = WebSocketUpgrade.Handoff(options: options)
        request[option: WebSocketUpgrade.self] = handoff
        let streamed: StreamedResponse
        do {
            streamed = try await stream(request)
        } catch {
            await handoff.take()?.close()
            throw error
        }
        let frames = handoff.take()
        guard streamed.status.code == 101, let frames else {
            await frames?.close()
            if streamed.status.code == 101 {
                throw CatenaError(
                    .invalidRequest, request: streamed.request, response: streamed.head,
                    detail: "the transport answered 101 but opened no WebSocket: use AsyncHTTPClientTransport")
            }
            let response = (try? await streamed.body.collect(upTo: 64 * 1024)).map { body in
                var head = streamed.head
                head.body = body
                return head
            }
            streamed.body.cancel()
            throw CatenaError(
                .unacceptableStatus, request: streamed.request, response: response ?? streamed.head,
                detail: "the server answered the WebSocket upgrade with \(streamed.status.code) instead of 101 Switching Protocols")
        }
        let chosen = streamed.headerFields[.secWebSocketProtocol]
        var refusal: String?
        var codec: (any WebSocketMessageCodec)?
        if let chosen, !options.subprotocols.contains(chosen) {
            refusal = "the server chose the WebSocket subprotocol \"\(WebSocketClose.printable(String(chosen.prefix(80))))\", which was not offered"
        } else if case let answers = streamed.headerFields[values: .secWebSocketExtensions], !answers.isEmpty {
            let answer = answers.joined(separator: ",")
            if let compression = options.compression {
                switch PerMessageDeflate.agreed(answer, offered: compression) {
                case .success(let agreed):
                    do {
                        codec = try frames.messageCodec(for: agreed)
                    } catch {
                        refusal = "permessage-deflate could not be set up: \(error.detail)"
                    }
                case .failure(let failure):
                    refusal = failure.detail
                }
            } else {
                // RFC 6455 section 4.1: an extension the client did not ask for fails the connection.
                refusal = "the server answered with a WebSocket extension, and none was offered"
            }
        }
        if let refusal {
            await frames.close()
            streamed.body.cancel()
            throw CatenaError(.invalidResponse, request: streamed.request, response: streamed.head, detail: refusal)
        }
        return WebSocket(
            frames: frames, response: streamed.head, subprotocol: chosen, options: options, codec: codec, upgradeBody: streamed.body, handoff: handoff)
    }

    private static var separators: Set<UInt8> { Set("()<>@,;:\\\"/[]?={}".utf8) }
}
