#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
public import Foundation
#if canImport(Security)
import Security
#endif

/// Keeps tokens between runs of a program, under a name of the app's choosing.
///
/// ``FileTokenStorage`` keeps them in files only the user can read; on Apple platforms
/// `KeychainTokenStorage` keeps them in the Keychain. A ``TokenAuthMiddleware`` made
/// for an ``OAuth2Client`` reads the token once, saves every new one (a rotated
/// refresh token replaces the old before any request uses it) and removes it on
/// `reset()`.
public protocol TokenStorage: Sendable {
    /// The token kept under `name`, if any.
    func token(named name: String) throws -> BearerToken?
    /// Keeps `token` under `name`, replacing what was there.
    func save(_ token: BearerToken, named name: String) throws
    /// Forgets the token kept under `name`; nothing kept is no failure.
    func removeToken(named name: String) throws
    /// Runs `body` while no other holder of the lock on `name` runs: a refresh reads,
    /// renews and saves under it, so that two processes never spend one refresh token
    /// twice (a server that rotates them would revoke both). The default runs `body` at once.
    func withExclusiveAccess<T>(named name: String, _ body: () async throws -> T) async throws -> T
}

extension TokenStorage {
    public func withExclusiveAccess<T>(named name: String, _ body: () async throws -> T) async throws -> T {
        try await body()
    }
}

/// A ``TokenStorage`` failure: which name or file, and why.
public struct TokenStorageError: Error, Sendable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }

    /// Names are 1 to 64 letters, digits, `.`, `_` and `-`, not starting with `.`: a
    /// name becomes a file name, so it may not climb out of the directory.
    static func check(_ name: String) throws {
        let allowed = name.utf8.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || byte == 0x2E || byte == 0x5F || byte == 0x2D
        }
        guard allowed, (1...64).contains(name.utf8.count), !name.hasPrefix(".") else {
            throw TokenStorageError("\"\(ProblemDetails.printable(name, limit: 80))\" is not a token name: use 1 to 64 letters, digits, '.', '_' or '-'")
        }
    }
}

/// Keeps each token as JSON in a file of its own, `NAME.json`, that only the user can
/// read and write (mode 0600, in a directory of mode 0700).
///
/// A save writes a new file and renames it over the old one, so a crash leaves the
/// old token or the new, never half of either. A file that others may read, or a
/// symbolic link, is refused rather than trusted.
public struct FileTokenStorage: TokenStorage {
    /// Where the files are.
    public let directory: URL

    /// - Parameter directory: where the files go; by default ``defaultDirectory``.
    public init(directory: URL? = nil) {
        self.directory = directory ?? Self.defaultDirectory
    }

    /// `$XDG_CONFIG_HOME/catena/tokens` when that variable names an absolute path, else
    /// `~/.config/catena/tokens`.
    public static var defaultDirectory: URL {
        let environment = ProcessInfo.processInfo.environment
        if let config = environment["XDG_CONFIG_HOME"], config.hasPrefix("/") {
            return URL(fileURLWithPath: config).appending(path: "catena/tokens", directoryHint: .isDirectory)
        }
        // NSHomeDirectory is the app's container on iOS.
        let home = environment["HOME"].flatMap { $0.hasPrefix("/") ? URL(fileURLWithPath: $0) : nil } ?? URL(fileURLWithPath: NSHomeDirectory())
        return home.appending(path: ".config/catena/tokens", directoryHint: .isDirectory)
    }

    /// The file a token named `name` is kept in.
    public func file(named name: String) throws -> URL {
        try TokenStorageError.check(name)
        return directory.appending(path: name + ".json", directoryHint: .notDirectory)
    }

    public func token(named name: String) throws -> BearerToken? {
        let path = try file(named: name).path
        // Non-blocking, so that a FIFO put in its place cannot hang the read.
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            if errno == ENOENT { return nil }
            throw TokenStorageError("cannot read \(path): \(String(cString: strerror(errno)))")
        }
        defer { _ = close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw TokenStorageError("cannot read \(path): \(String(cString: strerror(errno)))") }
        guard info.st_mode & S_IFMT == S_IFREG, info.st_uid == geteuid() else {
            throw TokenStorageError("\(path) is not a file of this user's: remove it and sign in again")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw TokenStorageError(
                "\(path) may be read by others (mode \(String(info.st_mode & 0o777, radix: 8))): make it 0600, or remove it and sign in again")
        }
        guard info.st_size <= 64 * 1024 else { throw TokenStorageError("\(path) is larger than 64 KiB: not a token") }
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while data.count <= 64 * 1024 {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            data.append(contentsOf: buffer[..<count])
        }
        do {
            return try JSONDecoder().decode(BearerToken.self, from: data)
        } catch {
            throw TokenStorageError("\(path) does not hold a token (\(CatenaError.describe(error)))")
        }
    }

    public func save(_ token: BearerToken, named name: String) throws {
        let target = try file(named: name)
        try makeDirectory()
        let data = try JSONEncoder().encode(token)
        // Through a file of its own, made 0600 before a byte is written, flushed with its
        // rename: after a power cut, not the spent token back.
        if let failed = PrivateFile.write(data, to: target.path, directory: directory.path, durable: true) {
            throw TokenStorageError("cannot write \(target.path): \(String(cString: strerror(failed)))")
        }
    }

    /// Holds an advisory lock (`flock`) on `.NAME.lock` beside the token while `body`
    /// runs, so that processes sharing the token take turns; waits at most 30 s for it.
    public func withExclusiveAccess<T>(named name: String, _ body: () async throws -> T) async throws -> T {
        try TokenStorageError.check(name)
        try makeDirectory()
        let path = directory.appending(path: ".\(name).lock").path
        let fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw TokenStorageError("cannot lock \(path): \(String(cString: strerror(errno)))") }
        defer { _ = close(fd) }  // closing releases the lock
        let deadline = ContinuousClock.now + .seconds(30)
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            // A file system without locks (some network ones): as good as it gets, unlocked.
            guard errno == EWOULDBLOCK || errno == EINTR else { return try await body() }
            guard ContinuousClock.now < deadline else { throw TokenStorageError("cannot lock \(path): another process has held it for 30 s") }
            try await Task.sleep(for: .milliseconds(20))
        }
        return try await body()
    }

    public func removeToken(named name: String) throws {
        let path = try file(named: name).path
        guard unlink(path) == 0 || errno == ENOENT else { throw TokenStorageError("cannot remove \(path): \(String(cString: strerror(errno)))") }
    }

    /// The directory, made 0700 when missing.
    private func makeDirectory() throws {
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw TokenStorageError("cannot make \(directory.path): \(CatenaError.describe(error))")
        }
    }
}

#if canImport(Security)
/// Keeps each token in the Keychain as a generic password: `service` and the name as
/// the account, the token's JSON as the data, readable after the device's first unlock
/// (so that a background refresh works) and never synced or restored to another device.
public struct KeychainTokenStorage: TokenStorage {
    /// The Keychain service the items are filed under.
    public let service: String

    /// - Parameter service: the Keychain service the items are filed under.
    public init(service: String = "Catena OAuth tokens") {
        self.service = service
    }

    private func query(_ name: String) -> [String: Any] {
        [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service, kSecAttrAccount as String: name]
    }

    public func token(named name: String) throws -> BearerToken? {
        try TokenStorageError.check(name)
        var search = query(name)
        search[kSecReturnData as String] = true
        search[kSecMatchLimit as String] = kSecMatchLimitOne
        var item: CFTypeRef?
        let status = SecItemCopyMatching(search as CFDictionary, &item)
        if status == errSecItemNotFound { return nil }
        guard status == errSecSuccess, let data = item as? Data else { throw TokenStorageError("the Keychain cannot read \(name) (OSStatus \(status))") }
        do {
            return try JSONDecoder().decode(BearerToken.self, from: data)
        } catch {
            throw TokenStorageError("the Keychain item \(name) does not hold a token")
        }
    }

    public func save(_ token: BearerToken, named name: String) throws {
        try TokenStorageError.check(name)
        let data = try JSONEncoder().encode(token)
        let update = [kSecValueData as String: data] as [String: Any]
        var status = SecItemUpdate(query(name) as CFDictionary, update as CFDictionary)
        if status == errSecItemNotFound {
            var item = query(name)
            item[kSecValueData as String] = data
            item[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
            status = SecItemAdd(item as CFDictionary, nil)
        }
        guard status == errSecSuccess else { throw TokenStorageError("the Keychain cannot save \(name) (OSStatus \(status))") }
    }

    /// Takes turns with other processes (two runs of a command) through
    /// ``FileTokenStorage``'s lock file in its default directory.
    public func withExclusiveAccess<T>(named name: String, _ body: () async throws -> T) async throws -> T {
        try await FileTokenStorage().withExclusiveAccess(named: name, body)
    }

    public func removeToken(named name: String) throws {
        try TokenStorageError.check(name)
        let status = SecItemDelete(query(name) as CFDictionary)
        guard status == errSecSuccess || status == errSecItemNotFound else {
            throw TokenStorageError("the Keychain cannot remove \(name) (OSStatus \(status))")
        }
    }
}
#endif
