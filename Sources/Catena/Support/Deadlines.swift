import Dispatch

/// The deadlines of many calls on one timer source.
///
/// A timer source per call costs a source made, armed, resumed and cancelled, each a
/// turn of libdispatch's timer machinery, for a deadline that almost never fires. Here a
/// call's deadline is an entry in a dictionary, added and removed under a lock, and the
/// one source is armed for the earliest entry only when a new one comes before it. When
/// it fires, it runs the entries that are due and arms itself for the earliest left:
/// calls that ended long ago cost at most one extra wake-up each time it comes round,
/// and nothing stays queued behind them (a cancelled `asyncAfter` item would stay
/// until it falls due).
final class Deadlines: Sendable {
    /// One deadline, to remove when its call ends first.
    struct Token: Sendable {
        fileprivate let id: Int
    }

    private struct Entry {
        let due: DispatchTime
        let action: @Sendable () -> Void
    }

    // @unchecked Sendable: the source is a libdispatch timer, safe to arm from any
    // thread, and it is only armed with the lock held, so arming follows the order
    // of the entries' changes.
    private struct State: @unchecked Sendable {
        var source: (any DispatchSourceTimer)?
        var entries: [Int: Entry] = [:]
        var nextID = 0
        /// When the source fires next; `nil` while nothing is armed.
        var armed: DispatchTime?
    }

    private let state = Locked(State())

    init(queue: DispatchQueue = .global()) {
        let source = DispatchSource.makeTimerSource(queue: queue)
        // Weak: the source holds its handler, and the owner holds this object.
        source.setEventHandler { [weak self] in self?.fire() }
        source.schedule(deadline: .distantFuture)
        source.resume()
        state.withLock { $0.source = source }
    }

    deinit {
        state.withLock { $0.source?.cancel() }
    }

    /// Runs `action` on the source's queue at `due`, unless the token is removed first.
    func add(_ due: DispatchTime, _ action: @escaping @Sendable () -> Void) -> Token {
        state.withLock { state in
            let id = state.nextID
            state.nextID &+= 1
            state.entries[id] = Entry(due: due, action: action)
            if state.armed.map({ due < $0 }) ?? true {
                state.armed = due
                state.source?.schedule(deadline: due)
            }
            return Token(id: id)
        }
    }

    /// Forgets a deadline; nothing happens when it has already run or was removed.
    func remove(_ token: Token) {
        state.withLock { _ = $0.entries.removeValue(forKey: token.id) }
    }

    /// How many deadlines are waiting (for tests).
    var count: Int { state.withLock { $0.entries.count } }

    private func fire() {
        let now = DispatchTime.now()
        let due = state.withLock { state -> [(id: Int, entry: Entry)] in
            var due: [(id: Int, entry: Entry)] = []
            var next: DispatchTime?
            for (id, entry) in state.entries {
                if entry.due <= now {
                    due.append((id, entry))
                } else if next.map({ entry.due < $0 }) ?? true {
                    next = entry.due
                }
            }
            for (id, _) in due { state.entries[id] = nil }
            state.armed = next
            state.source?.schedule(deadline: next ?? .distantFuture)
            return due
        }
        // Outside the lock: an action may take its call's lock, and that call's lock is
        // held while it removes its deadline. In the order they fell due (a late wake-up
        // finds several), the first added first among equals.
        for (_, entry) in due.sorted(by: { ($0.entry.due, $0.id) < ($1.entry.due, $1.id) }) { entry.action() }
    }
}

extension Duration {
    /// The duration in seconds, as a `Double`.
    package var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
