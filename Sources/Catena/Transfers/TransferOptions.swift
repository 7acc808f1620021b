public import Foundation

/// How far a transfer has come.
public struct TransferProgress: Sendable, Equatable {
    /// Bytes transferred so far.
    public var completed: Int64
    /// Bytes expected in all, when the server said (`Content-Length`).
    public var total: Int64?

    public init(completed: Int64, total: Int64?) {
        self.completed = completed
        self.total = total
    }

    /// completed / total, or nil while the total is unknown.
    public var fraction: Double? {
        guard let total, total > 0 else { return total == 0 ? 1 : nil }
        return Double(completed) / Double(total)
    }
}

/// Reports how much of a request's body has been sent. Set it on a request (or use
/// ``Client/upload(_:)``). Both transports report as the body goes out;
/// `URLSessionTransport` over a session you gave it reports only the start and the end
/// on Linux (there, only a session-level delegate hears about bytes sent).
public enum UploadProgress: RequestOption {
    public static let defaultValue: (@Sendable (TransferProgress) -> Void)? = nil
}

/// Makes a transport write the response body to a file instead of memory, reporting
/// progress as it goes. Set it on a request (``DownloadEndpoint`` and
/// ``Client/download(_:)`` do); loaders in between pass it on untouched.
///
/// A 2xx body is written to a partial file of its own beside `file` (`.<name>.<UUID>.part`)
/// and renamed to `file` once complete, replacing what was there in one step; on
/// failure or cancellation the partial file is removed. The response's `body` is then
/// empty, and ``MaximumResponseSize`` does not apply: the body never sits in memory.
/// Any other status keeps its body in memory as usual (an error body, for validation)
/// and leaves `file` alone. A `file` that exists and is no regular file (`/dev/null`, a
/// FIFO, a symbolic link) is written to in place, never replaced.
public struct DownloadDestination: Sendable, RequestOption {
    /// Where the body ends up.
    public var file: URL
    /// Called as bytes arrive, from the transport's threads.
    public var progress: (@Sendable (TransferProgress) -> Void)?

    public init(file: URL, progress: (@Sendable (TransferProgress) -> Void)? = nil) {
        self.file = file
        self.progress = progress
    }

    public static let defaultValue: DownloadDestination? = nil
}

/// Writes a download to a hidden `.<file>.<UUID>.part` beside it, then renames it into
/// place. For transports.
package final class DownloadWriter {
    private let destination: DownloadDestination
    private let partial: URL
    private let handle: FileHandle
    private let total: Int64?
    private var written: Int64 = 0
    private var finished = false
    /// Written in place: the destination is a device, a FIFO or a link, which a rename
    /// would replace (as root, /dev/null itself).
    private let inPlace: Bool

    /// Creates (or truncates) the partial file.
    package init(_ destination: DownloadDestination, expectedLength: Int64?, request: APIRequest) throws(CatenaError) {
        self.destination = destination
        self.total = expectedLength
        // attributesOfItem does not follow a link: a link is written through, in place.
        let type = (try? FileManager.default.attributesOfItem(atPath: destination.file.path))?[.type] as? FileAttributeType
        inPlace = type != nil && type != .typeRegular
        // Else a name of its own in the same folder (so the final rename stays on one
        // file system): two downloads to one destination never write into each other.
        self.partial =
            inPlace
            ? destination.file
            : destination.file.deletingLastPathComponent().appendingPathComponent(".\(destination.file.lastPathComponent).\(UUID().uuidString).part")
        guard inPlace || FileManager.default.createFile(atPath: partial.path, contents: nil),
            let handle = try? FileHandle(forWritingTo: partial)
        else {
            throw CatenaError(.invalidRequest, request: request, detail: "cannot write the download to \(destination.file.path)")
        }
        // A regular file behind a link starts empty; a device or FIFO cannot be truncated.
        if inPlace { try? handle.truncate(atOffset: 0) }
        self.handle = handle
        destination.progress?(TransferProgress(completed: 0, total: total))
    }

    /// Appends a chunk and reports progress.
    package func write(_ chunk: Data, request: APIRequest) throws(CatenaError) {
        do {
            try handle.write(contentsOf: chunk)
        } catch {
            throw CatenaError(.invalidResponse, request: request, underlyingError: error, detail: "writing the download to \(partial.path) failed")
        }
        written += Int64(chunk.count)
        destination.progress?(TransferProgress(completed: written, total: total))
    }

    /// Closes the file and moves it into place, replacing what was there.
    package func finish(request: APIRequest) throws(CatenaError) {
        try? handle.close()
        if inPlace {
            finished = true
            return
        }
        do {
            // rename(2) replaces what was there in one step: a failure leaves the old
            // file as it was.
            guard rename(partial.path, destination.file.path) == 0 else {
                throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: destination.file.path, "errno": errno])
            }
            finished = true
        } catch {
            throw CatenaError(.invalidResponse, request: request, underlyingError: error, detail: "moving the download to \(destination.file.path) failed")
        }
    }

    /// Removes the partial file unless the download finished.
    deinit {
        guard !finished else { return }
        try? handle.close()
        if !inPlace { try? FileManager.default.removeItem(at: partial) }
    }
}
