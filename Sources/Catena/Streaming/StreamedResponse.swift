public import Foundation
public import HTTPTypes

/// A response whose head has arrived and whose body is read as it comes.
///
/// Get one with ``HTTPLoader/stream(_:)`` through any chain. Read ``body`` once, with
/// `for try await chunk in response.body`; leaving the loop, cancelling the task or
/// dropping the response cancels the request and frees the connection.
/// ``collect()`` gives what ``HTTPLoader/load(_:)`` gives.
public struct StreamedResponse: Sendable {
    /// The status.
    public var status: HTTPResponse.Status
    /// The header fields.
    public var headerFields: HTTPFields
    /// The request as it was finally sent.
    public var request: APIRequest
    /// The body, as it arrives.
    public var body: ResponseBody
    /// The time to the head, as the transport measured it (nil when the response did
    /// not come from the network); ``collect()`` adds the body's duration.
    public var timing: ResponseTiming?

    /// A streamed response from its parts.
    public init(status: HTTPResponse.Status, headerFields: HTTPFields = [:], body: ResponseBody, request: APIRequest) {
        self.status = status
        self.headerFields = headerFields
        self.body = body
        self.request = request
    }

    /// A complete response as a stream of one chunk (what a loader that cannot stream
    /// gives).
    public init(complete response: APIResponse) {
        self.init(status: response.status, headerFields: response.headerFields, body: ResponseBody(response.body), request: response.request)
        timing = response.timing
    }

    /// The head: status, header fields and request, with an empty body.
    public var head: APIResponse {
        var head = APIResponse(status: status, headerFields: headerFields, body: Data(), request: request)
        head.timing = timing
        return head
    }

    /// Reads the whole body, up to the request's ``MaximumResponseSize``.
    public func collect() async throws(CatenaError) -> APIResponse {
        let data = try await body.collect(upTo: request[option: MaximumResponseSize.self])
        var response = APIResponse(status: status, headerFields: headerFields, body: data, request: request)
        response.timing = timing.map { $0.bodyDuration == nil ? $0.withBody(endedAt: .now) : $0 }
        return response
    }
}

/// A response body as an `AsyncSequence` of byte chunks, read once.
///
/// The transport holds at most a bounded window of unread bytes (``StreamWindow``): a
/// slow reader slows the transfer. Errors are ``CatenaError``s: `timedOut` when the
/// body goes silent for longer than ``StreamIdleTimeout``, `cancelled` when the
/// reading task is cancelled, and the transport's own for a broken connection.
public struct ResponseBody: AsyncSequence, Sendable {
    public typealias Element = Data
    public typealias Failure = CatenaError

    let reader: BodyReader

    /// A body that is already complete.
    public init(_ data: Data) {
        reader = BodyReader(.complete(data))
    }

    package init(channel: BodyChannel) {
        reader = BodyReader(.channel(channel))
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(reader: reader, lifetime: IteratorLifetime(reader))
    }

    /// Reads the chunks in order. When the iterator goes away before the end (the
    /// `for` loop was left), the body ends: the transfer is cancelled.
    public struct AsyncIterator: AsyncIteratorProtocol, Sendable {
        let reader: BodyReader
        let lifetime: IteratorLifetime

        public mutating func next() async throws(CatenaError) -> Data? {
            try await reader.next()
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(CatenaError) -> Data? {
            try await reader.next()
        }
    }

    /// Reads every chunk into one `Data`; fails with
    /// ``CatenaError/Code/invalidResponse`` past `limit` bytes (and stops the transfer).
    public func collect(upTo limit: Int) async throws(CatenaError) -> Data {
        var data = Data()
        while let chunk = try await reader.next() {
            guard data.count + chunk.count <= limit else {
                let error = CatenaError(
                    .invalidResponse, request: reader.request,
                    detail: "the body is larger than the limit of \(limit) bytes (MaximumResponseSize)")
                reader.cancel(error)
                throw error
            }
            data.append(chunk)
        }
        return data
    }

    /// Stops reading: the transfer is cancelled and the connection freed.
    public func cancel() {
        reader.cancel(CatenaError(.cancelled, request: reader.request, detail: "the streamed body was cancelled"))
    }

    /// Runs `hook` once when the body ends: read to its end (nil error), failed,
    /// cancelled or dropped. It gets the bytes handed to the reader. Loaders use it to
    /// log a stream's size or release what they hold for it.
    public func whenEnded(_ hook: @escaping @Sendable (_ bytes: Int, _ error: CatenaError?) -> Void) {
        reader.whenEnded(hook)
    }
}

/// How many unread bytes a streamed body may hold before the transport pauses: the
/// memory a slow reader costs. The default, 512 KiB, lets the next read from the
/// socket land while the reader drains the last one; a much smaller window pauses the
/// transfer more often and costs more thread switches per megabyte. URLSession on
/// Linux cannot pause a transfer: there a body fails once it runs 16 windows (at least
/// 4 MiB) ahead of its reader.
///
/// ```swift
/// var request = try APIRequest(path: ["export"])
/// request[option: StreamWindow.self] = 64 * 1024  // little memory, more pauses
/// ```
public enum StreamWindow: RequestOption {
    public static let defaultValue = 512 * 1024
}

/// The longest a streamed body may stay silent (before its first chunk too); nil,
/// the default, waits as long as the server likes. The request's `timeout` covers
/// the time to the response head.
public enum StreamIdleTimeout: RequestOption {
    public static let defaultValue: Duration? = nil
}

/// Ends a body whose iterator is dropped before the body's end.
final class IteratorLifetime: Sendable {
    let reader: BodyReader
    init(_ reader: BodyReader) { self.reader = reader }
    deinit {
        reader.cancel(CatenaError(.cancelled, request: reader.request, detail: "the loop reading the streamed body was left before its end"))
    }
}

/// The one reader of a body: its source, the bytes it handed out, and the hooks to
/// run once at the end. Dropping the last reference ends the body, which cancels the
/// transfer of a streamed one.
final class BodyReader: Sendable {
    enum Source: Sendable {
        case complete(Data)
        case channel(BodyChannel)
    }

    private struct State {
        var source: Source
        var bytes = 0
        var ended = false
        var endError: CatenaError?
        var hooks: [@Sendable (Int, CatenaError?) -> Void] = []
    }

    private let state: Locked<State>
    private let channel: BodyChannel?

    init(_ source: Source) {
        state = Locked(State(source: source))
        if case .channel(let channel) = source { self.channel = channel } else { channel = nil }
    }

    deinit {
        cancel(CatenaError(.cancelled, request: request, detail: "the streamed body was dropped before its end"))
    }

    var request: APIRequest {
        channel?.request ?? .placeholder
    }

    /// The most bytes the transport held unread (0 for a complete body), for tests.
    var peakBuffered: Int { channel?.peakBuffered ?? 0 }

    /// The most chunks the transport held unread, for tests.
    var peakChunks: Int { channel?.peakChunks ?? 0 }

    func next() async throws(CatenaError) -> Data? {
        if let channel {
            let chunk: Data?
            do {
                chunk = try await channel.next()
            } catch {
                end(error)
                throw error
            }
            if let chunk {
                state.withLock { $0.bytes += chunk.count }
            } else {
                end(nil)
            }
            return chunk
        }
        let chunk = state.withLock { state -> Data? in
            guard case .complete(let data) = state.source, !data.isEmpty else { return nil }
            state.source = .complete(Data())
            state.bytes += data.count
            return data
        }
        if chunk == nil { end(nil) }
        return chunk
    }

    func cancel(_ error: CatenaError) {
        channel?.terminate(with: error)
        end(error)
    }

    func whenEnded(_ hook: @escaping @Sendable (Int, CatenaError?) -> Void) {
        let runNow = state.withLock { state -> (Int, CatenaError?)? in
            if state.ended { return (state.bytes, state.endError) }
            state.hooks.append(hook)
            return nil
        }
        if let (bytes, error) = runNow { hook(bytes, error) }
    }

    private func end(_ error: CatenaError?) {
        let (hooks, bytes) = state.withLock { state -> ([@Sendable (Int, CatenaError?) -> Void], Int) in
            guard !state.ended else { return ([], 0) }
            state.ended = true
            state.endError = error
            defer { state.hooks = [] }
            return (state.hooks, state.bytes)
        }
        for hook in hooks { hook(bytes, error) }
    }
}
