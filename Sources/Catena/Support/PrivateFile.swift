#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// Files only their user may read: written whole or not at all, read without trusting
/// what is on disk. For tokens and cached responses, which may both be secrets.
enum PrivateFile {
    /// Writes `data` to `target` through a new file (mode 0600 before a byte is written)
    /// in `directory`, renamed over `target`: a reader sees the old file or the new,
    /// never half of either. `durable` also flushes the file and the rename to the disk
    /// (a token must survive a power cut; a cache entry that does not is only a miss).
    /// Returns nil, or the `errno` that stopped it.
    static func write(_ data: Data, to target: String, directory: String, durable: Bool) -> Int32? {
        let temporary = directory + "/." + OAuth2Client.randomToken().prefix(12) + ".tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return errno }
        var written = 0
        var failed: Int32 = 0
        data.withUnsafeBytes { bytes in
            while written < bytes.count {
                let count = posixWrite(fd, bytes.baseAddress! + written, bytes.count - written)
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else {
                    failed = count < 0 ? errno : ENOSPC
                    return
                }
                written += count
            }
        }
        if failed == 0, durable, fsync(fd) != 0 { failed = errno }
        if close(fd) != 0, failed == 0 { failed = errno }
        guard failed == 0, rename(temporary, target) == 0 else {
            let reason = failed == 0 ? errno : failed
            _ = unlink(temporary)
            return reason
        }
        if durable {
            let folder = open(directory, O_RDONLY | O_CLOEXEC)
            if folder >= 0 {
                _ = fsync(folder)
                _ = close(folder)
            }
        }
        return nil
    }

    /// What reading a file found.
    enum Contents {
        case missing
        /// Not a regular file of this user's, readable by others, or larger than allowed.
        case refused(String)
        case failed(Int32)
        case read(Data)
    }

    /// Reads `path` whole when it is a regular file of this user's, closed to others,
    /// of at most `maximumBytes`. Never follows a symbolic link; never blocks on a FIFO.
    static func read(_ path: String, maximumBytes: Int) -> Contents {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return errno == ENOENT ? .missing : .failed(errno) }
        defer { _ = close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return .failed(errno) }
        guard info.st_mode & S_IFMT == S_IFREG, info.st_uid == geteuid() else { return .refused("not a file of this user's") }
        guard info.st_mode & 0o077 == 0 else { return .refused("mode \(String(info.st_mode & 0o777, radix: 8)), open to others") }
        guard info.st_size <= maximumBytes else { return .refused("larger than \(maximumBytes) bytes") }
        var data = Data(count: Int(info.st_size))
        var filled = 0
        var failure: Int32 = 0
        data.withUnsafeMutableBytes { bytes in
            while filled < bytes.count {
                let count = posixRead(fd, bytes.baseAddress! + filled, bytes.count - filled)
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else {
                    if count < 0 { failure = errno }
                    return
                }
                filled += count
            }
        }
        if failure != 0 { return .failed(failure) }
        // Shorter than fstat said: another process truncated it under us.
        return .read(filled == data.count ? data : data.prefix(filled))
    }
}

// `write` and `read` are also members' names in scope above.
private func posixWrite(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int { write(fd, buffer, count) }
private func posixRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int { read(fd, buffer, count) }
