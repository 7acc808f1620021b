import Foundation

/// A value behind a lock, with `Mutex`'s `withLock` shape.
///
/// This module locks with `NSLock` (a pthread mutex) rather than Synchronization's
/// `Mutex`: ThreadSanitizer does not see `Mutex`'s contended path on Linux and reports
/// races that are not there (reproduced with four threads appending to a
/// `Mutex<[T]>`), and this module's TSan run is part of CI.
final class Locked<Value>: @unchecked Sendable {
    // @unchecked Sendable: `value` is only touched with `lock` held.
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
