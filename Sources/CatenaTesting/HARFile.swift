public import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension HAR {
    /// The largest HAR file read by default: 256 MiB. A larger one is refused before it
    /// is read whole.
    public static let maximumFileBytes = 256 << 20

    /// Adds `entries` to the HAR file at `url`, made (mode 0600) when missing.
    ///
    /// Everything the file held stays, also what ``HAR`` does not model: a browser's
    /// pages, `pageref`, `_initiator`, `postData.params` and its other fields come back
    /// out as they went in. The file is locked while it is read and replaced, so
    /// processes appending to one file at once lose no entry; the new file replaces the
    /// old at once, readable by its owner only.
    ///
    /// - Throws: ``HARError`` when the file is over `maximumBytes` (checked before it is
    ///   read), is not a HAR file, or cannot be read or written.
    public static func append(_ entries: [Entry], toFileAt url: URL, maximumBytes: Int = HAR.maximumFileBytes) throws(HARError) {
        try HARFile.withLock(url) { (descriptor: Int32, size: Int) throws(HARError) in
            guard size <= maximumBytes else {
                throw HARError("\(url.path) has \(size) bytes, more than the \(maximumBytes) a HAR file may have here")
            }
            let existing = try HARFile.readAll(descriptor, size: size, path: url.path)
            let added: [Any]
            do {
                let object = try JSONSerialization.jsonObject(with: HAR(entries: entries).encoded())
                added = ((object as? [String: Any])?["log"] as? [String: Any])?["entries"] as? [Any] ?? []
            } catch {
                throw HARError("cannot encode the entries: \(error)")
            }
            // An empty file is one this call just made.
            let source = existing.isEmpty ? (try? HAR(entries: []).encoded()) ?? Data() : existing
            guard var root = try? JSONSerialization.jsonObject(with: source) as? [String: Any],
                var log = root["log"] as? [String: Any], let kept = log["entries"] as? [Any]
            else { throw HARError("\(url.lastPathComponent) is not a HAR file (no log with entries)") }
            log["entries"] = kept + added
            root["log"] = log
            try HARFile.replace(url, with: HARFile.serialized(root, path: url.path))
        }
    }
}

/// The file operations behind ``HAR``: POSIX calls, the same on Linux and Apple platforms.
enum HARFile {
    static func serialized(_ root: [String: Any], path: String) throws(HARError) -> Data {
        do {
            return try JSONSerialization.data(withJSONObject: root, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        } catch {
            throw HARError("cannot encode \(path): \(error)")
        }
    }

    /// The bytes of the file at `url`, refused when over `maximumBytes` before any is read.
    static func read(_ url: URL, maximumBytes: Int) throws(HARError) -> Data {
        let descriptor = open(url.path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw HARError("cannot read \(url.path): \(errorText())") }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw HARError("cannot read \(url.path): \(errorText())") }
        let size = Int(info.st_size)
        guard size <= maximumBytes else {
            throw HARError("\(url.path) has \(size) bytes, more than the \(maximumBytes) a HAR file may have here")
        }
        return try readAll(descriptor, size: size, path: url.path)
    }

    /// Reads `size` bytes from the start of `descriptor` (and no more, should it grow).
    static func readAll(_ descriptor: Int32, size: Int, path: String) throws(HARError) -> Data {
        var data = Data(count: size)
        var done = 0
        while done < size {
            let count = data.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress! + done, size - done, off_t(done)) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { throw HARError("cannot read \(path): \(count == 0 ? "it shrank while read" : errorText())") }
            done += count
        }
        return data
    }

    /// Runs `body` holding an exclusive lock on the file at `url` (made, mode 0600, when
    /// missing), with its descriptor and size. A file replaced while this waited for the
    /// lock is opened and locked again, so `body` always sees the newest one.
    static func withLock(_ url: URL, _ body: (Int32, Int) throws(HARError) -> Void) throws(HARError) {
        // Each retry means another process replaced the file meanwhile; a hundred in a
        // row means something else keeps doing it.
        for _ in 0..<100 {
            let descriptor = open(url.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            guard descriptor >= 0 else { throw HARError("cannot open \(url.path): \(errorText())") }
            defer { close(descriptor) }
            var locked = flock(descriptor, LOCK_EX)
            while locked != 0, errno == EINTR { locked = flock(descriptor, LOCK_EX) }
            guard locked == 0 else { throw HARError("cannot lock \(url.path): \(errorText())") }
            var held = stat()
            var current = stat()
            guard fstat(descriptor, &held) == 0 else { throw HARError("cannot read \(url.path): \(errorText())") }
            if stat(url.path, &current) != 0 {
                // Renamed away between our open and our lock: open the new one.
                guard errno == ENOENT else { throw HARError("cannot read \(url.path): \(errorText())") }
                continue
            }
            guard current.st_ino == held.st_ino, current.st_dev == held.st_dev else { continue }
            try body(descriptor, Int(held.st_size))
            return
        }
        throw HARError("cannot lock \(url.path): it was replaced a hundred times while this waited")
    }

    /// Replaces the file at `url` with `data` at once: written to a new file (mode 0600)
    /// beside it, then renamed over it.
    static func replace(_ url: URL, with data: Data) throws(HARError) {
        let temporary = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).\(UUID().uuidString).tmp").path
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw HARError("cannot write \(url.path): \(errorText())") }
        var written = 0
        while written < data.count {
            let count = data.withUnsafeBytes { write(descriptor, $0.baseAddress! + written, data.count - written) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else {
                let reason = errorText()
                close(descriptor)
                unlink(temporary)
                throw HARError("cannot write \(url.path): \(reason)")
            }
            written += count
        }
        let synced = fsync(descriptor) == 0
        let closed = close(descriptor) == 0
        guard synced, closed else {
            let reason = errorText()
            unlink(temporary)
            throw HARError("cannot write \(url.path): \(reason)")
        }
        guard rename(temporary, url.path) == 0 else {
            let reason = errorText()
            unlink(temporary)
            throw HARError("cannot write \(url.path): \(reason)")
        }
    }

    static func errorText() -> String {
        String(cString: strerror(errno))
    }
}
