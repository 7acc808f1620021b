#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// Entries as files in a directory, so that they outlive the process.
///
/// - One file an entry, `URLHASH-WHOHASH.entry`: SHA-256 of the URL, and of who asked
///   (the request's credentials, keyed with a random secret kept in the directory's
///   `.key`), so no URL or credential appears in clear in a name. Files are 0600 in a
///   0700 directory: the bodies of authenticated calls are secrets.
/// - Written to a new file and renamed into place: another process reads the old entry
///   or the new. Not flushed to the disk: a file a crash tore fails its checksum and
///   is a miss (see `CacheEntry.init(archived:key:)`), never a wrong answer.
/// - The index (sizes and the order of use) is rebuilt from the files when first
///   needed, oldest modified first out. Processes sharing a directory each count what
///   they see: until the next start, the directory may hold what another process wrote
///   beyond the bound.
/// - A directory that cannot be made or written costs misses: calls go to the network.
final class DiskCacheStore: CacheStore {
    let directory: URL
    private let maximumBytes: Int
    private let counters: CacheCounters

    private struct State {
        /// Nil until first used; then whether the directory could be used at all.
        var usable: Bool?
        var secret: [UInt8] = []
        /// Sizes by file name.
        var files: [String: Int] = [:]
        var bytes = 0
        var order = RecencyOrder()
    }

    private let state = Locked(State())
    private static let suffix = ".entry"

    init(directory: URL, maximumBytes: Int, counters: CacheCounters) {
        self.directory = directory
        self.maximumBytes = maximumBytes
        self.counters = counters
    }

    var usage: (entries: Int, bytes: Int) {
        _ = prepared()
        return state.withLock { ($0.files.count, $0.bytes) }
    }

    func entry(for address: String, matching request: APIRequest) -> CacheEntry? {
        guard let (name, seal) = file(address, request) else { return nil }
        let path = directory.path + "/" + name
        // `put` writes no file larger than the bound: a larger one is not the cache's.
        switch PrivateFile.read(path, maximumBytes: maximumBytes) {
        case .read(let data):
            guard let entry = CacheEntry(archived: data, key: name, secret: seal) else {
                remove(files: [name])
                return nil
            }
            guard entry.matches(request) else { return nil }
            state.withLock { state in
                if state.files[name] == nil {
                    // Another process wrote it since the index was built.
                    state.files[name] = data.count
                    state.bytes += data.count
                }
                state.order.touch(name)
            }
            return entry
        case .refused:
            remove(files: [name])
            return nil
        case .missing, .failed:
            forget([name])
            return nil
        }
    }

    func put(_ entry: CacheEntry, for address: String, request: APIRequest, limit: Int) {
        guard let (name, seal) = file(address, request) else { return }
        guard let data = entry.archived(key: name, secret: seal), data.count <= limit,
            PrivateFile.write(data, to: directory.path + "/" + name, directory: directory.path, durable: false) == nil
        else {
            // Too large, or the disk refused: the entry it replaces is out of date.
            remove(files: [name])
            return
        }
        let victims = state.withLock { state in
            state.bytes += data.count - (state.files[name] ?? 0)
            state.files[name] = data.count
            state.order.touch(name)
            return Self.evict(&state, limit: limit)
        }
        remove(files: victims)
        counters.count(\.stored)
        if !victims.isEmpty { counters.count(\.evicted, by: victims.count) }
    }

    func remove(_ address: String, request: APIRequest) {
        guard let (name, _) = file(address, request) else { return }
        remove(files: [name])
    }

    func removeAll(forAddress address: String) {
        guard prepared() != nil else { return }
        // Listed, not looked up in the index: another process may have stored this URL
        // for an identity this one never saw.
        let prefix = Self.hex(SHA256.hash(Array(address.utf8))) + "-"
        remove(files: entryNames().filter { $0.hasPrefix(prefix) })
    }

    func removeAll() {
        guard prepared() != nil else { return }
        remove(files: entryNames())
    }

    // MARK: Files

    /// The file for `address` and who `request` speaks for, and the secret its `Vary`
    /// values are sealed with (the directory's and the name); nil when the directory
    /// cannot be used.
    private func file(_ address: String, _ request: APIRequest) -> (name: String, seal: [UInt8])? {
        guard let secret = prepared() else { return nil }
        let material = request.identityMaterial
        let who: String
        if material.isEmpty {
            who = "anyone"
        } else {
            // Length-prefixed, so that no two lists of fields give the same bytes.
            var bytes = secret
            for part in material {
                withUnsafeBytes(of: UInt64(part.utf8.count).bigEndian) { bytes.append(contentsOf: $0) }
                bytes.append(contentsOf: part.utf8)
            }
            who = String(Self.hex(SHA256.hash(bytes)).prefix(32))
        }
        let name = Self.hex(SHA256.hash(Array(address.utf8))) + "-" + who + Self.suffix
        return (name, secret + Array(name.utf8))
    }

    /// The directory's secret, once the directory is ready and indexed; nil when it
    /// cannot be used.
    private func prepared() -> [UInt8]? {
        state.withLock { state in
            if state.usable == nil {
                state.usable = false
                if let secret = makeDirectory() {
                    state.secret = secret
                    index(&state)
                    state.usable = true
                }
            }
            return state.usable == true ? state.secret : nil
        }
    }

    /// Makes the directory (0700) and its secret when missing; nil when either cannot be
    /// had, or the directory is someone else's.
    private func makeDirectory() -> [UInt8]? {
        let path = directory.path
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        var info = stat()
        guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, info.st_uid == geteuid() else { return nil }
        if info.st_mode & 0o077 != 0, chmod(path, 0o700) != 0 { return nil }
        let keyPath = path + "/.key"
        switch PrivateFile.read(keyPath, maximumBytes: 64) {
        case .read(let key) where key.count == 32: return [UInt8](key)
        case .missing: break
        // Damaged, or not this user's: replaced (the entries it named become misses).
        default: _ = unlink(keyPath)
        }
        // A new secret, linked into place only if no other process's got there first.
        var generator = SystemRandomNumberGenerator()
        let secret = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        let candidate = keyPath + "." + String(UInt64.random(in: .min ... .max, using: &generator), radix: 36)
        guard PrivateFile.write(Data(secret), to: candidate, directory: path, durable: true) == nil else { return nil }
        _ = link(candidate, keyPath)
        _ = unlink(candidate)
        if case .read(let key) = PrivateFile.read(keyPath, maximumBytes: 64), key.count == 32 { return [UInt8](key) }
        return nil
    }

    /// Rebuilds the index from the files, oldest modified first; removes what a crash
    /// left half written more than ten minutes ago, and what is beyond the bound.
    private func index(_ state: inout State) {
        var found: [(name: String, bytes: Int, modified: Double)] = []
        let now = Date().timeIntervalSince1970
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [] {
            var info = stat()
            guard lstat(directory.path + "/" + name, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { continue }
            #if canImport(Darwin)
            let modified = Double(info.st_mtimespec.tv_sec)
            #else
            let modified = Double(info.st_mtim.tv_sec)
            #endif
            if name.hasSuffix(Self.suffix) {
                // Larger than the bound: no file `put` wrote (and its size could overflow the sum).
                guard info.st_size <= maximumBytes else {
                    _ = unlink(directory.path + "/" + name)
                    continue
                }
                found.append((name, Int(info.st_size), modified))
            } else if name.hasPrefix("."), name.hasSuffix(".tmp") || name.hasPrefix(".key."), now - modified > 600 {
                _ = unlink(directory.path + "/" + name)
            }
        }
        // Newest first while they fit (a sum that cannot overflow); the rest go.
        var kept: [(name: String, bytes: Int)] = []
        var total = 0
        for file in found.sorted(by: { $0.modified > $1.modified }) {
            guard file.bytes <= maximumBytes - total else {
                _ = unlink(directory.path + "/" + file.name)
                continue
            }
            kept.append((file.name, file.bytes))
            total += file.bytes
        }
        // Used in the order they were modified: the oldest first out.
        for file in kept.reversed() {
            state.files[file.name] = file.bytes
            state.order.touch(file.name)
        }
        state.bytes = total
    }

    /// Takes the least recently used out of the index until it is within `limit`;
    /// returns their names, for removing outside the lock.
    private static func evict(_ state: inout State, limit: Int) -> [String] {
        var victims: [String] = []
        while state.bytes > limit, let name = state.order.popOldest() {
            if let bytes = state.files.removeValue(forKey: name) { state.bytes -= bytes }
            victims.append(name)
        }
        return victims
    }

    private func entryNames() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).filter { $0.hasSuffix(Self.suffix) && !$0.hasPrefix(".") }
    }

    private func remove(files names: [String]) {
        guard !names.isEmpty else { return }
        for name in names { _ = unlink(directory.path + "/" + name) }
        forget(names)
    }

    private func forget(_ names: [String]) {
        state.withLock { state in
            for name in names {
                if let bytes = state.files.removeValue(forKey: name) { state.bytes -= bytes }
                state.order.remove(name)
            }
        }
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text = [UInt8]()
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
