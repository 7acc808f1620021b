import Foundation

// The channel's state, reached only under `BodyChannel.state`'s lock.
extension BodyChannel {
    // @unchecked Sendable: the idle timer is reached only under the lock or, once taken
    // out, through `cancel()`, which dispatch sources allow from any thread.
    struct State: @unchecked Sendable {
        var chunks: [Data] = []
        var head = 0
        var buffered = 0
        /// Set when no more chunks will come: nil error for a clean end.
        var end: CatenaError??
        var reader: CheckedContinuation<Data?, any Error>?
        var writer: CheckedContinuation<Bool, Never>?
        /// The producer was told the window is full and waits for `onRoom`.
        var producerPaused = false
        /// A batching producer was told to call `wakeReader()` and has not yet.
        var wakePending = false
        /// The newest chunk gathers small parts (see ``BodyChannel/smallPart``). It may
        /// have been read already: it is appended to only while `head` is short of the
        /// end of `chunks`.
        var lastGathers = false
        var onTerminate: (@Sendable () -> Void)?
        var onRoom: (@Sendable () -> Void)?
        var timer: (any DispatchSourceTimer)?
        /// The last chunk handed in or taken out; kept only for the idle timer.
        var lastActivity = DispatchTime.now()
        /// The most bytes ever held unread, for tests of the window.
        var peak = 0
        /// The most chunks ever held unread, for tests of the gathering.
        var peakChunks = 0

        /// Takes the oldest waiting chunk, with whoever should go on producing now that
        /// there is room (a paused producer's `onRoom`, a waiting `send`).
        mutating func take(window: Int, tracksActivity: Bool) -> (Data, (@Sendable () -> Void)?, CheckedContinuation<Bool, Never>?)? {
            guard head < chunks.count else { return nil }
            let chunk = chunks[head]
            chunks[head] = Data()
            head += 1
            buffered -= chunk.count
            if tracksActivity { lastActivity = .now() }
            if head == chunks.count || head > 64 {
                chunks.removeFirst(head)
                head = 0
            }
            var room: (@Sendable () -> Void)?
            var waiting: CheckedContinuation<Bool, Never>?
            if buffered < window / 2 + 1 {
                if producerPaused {
                    producerPaused = false
                    room = onRoom
                }
                waiting = writer
                writer = nil
            }
            return (chunk, room, waiting)
        }
    }
}
