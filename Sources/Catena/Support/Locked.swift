import Foundation

/// A pthread mutex, for the package's shared state.
///
/// Not Synchronization's `Mutex`: ThreadSanitizer on Linux does not see it and reports
/// races that are not there, and CI runs the suite under TSan. Not `NSLock`: on Linux
/// each one allocates a mutex and a condition pair (Architecture: "Locks").
///
/// The owner calls ``destroy()`` in its `deinit`.
package struct PthreadLock: @unchecked Sendable {
    // @unchecked Sendable: a pthread mutex is made to be shared between threads.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    package init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    package func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    package func destroy() {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }
}

/// A value behind a ``PthreadLock``, with `Mutex`'s `withLock` shape.
package final class Locked<Value: Sendable>: @unchecked Sendable {
    // @unchecked Sendable: `value` is only touched with `lock` held, and is Sendable
    // itself, so what `withLock` hands out may cross threads (what Mutex checks with
    // `sending`).
    private let lock = PthreadLock()
    private var value: Value

    package init(_ value: Value) {
        self.value = value
    }

    deinit {
        lock.destroy()
    }

    package func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        try lock.withLock { try body(&value) }
    }
}
