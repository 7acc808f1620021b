#include "ThreadSanitizerSuppressions.h"

// What ThreadSanitizer ignores in the test process. Its runtime calls this at start-up,
// before Swift can run (a Swift @_cdecl function crashed there), so it is C and not
// instrumented. In a build without ThreadSanitizer nothing calls it.
//
// First, inside SwiftNIO and never in Catena's code: NIO's pooled receive buffers.
// The event loop reuses a buffer once isKnownUniquelyReferenced says the task that
// read the last chunk has let it go. The release and that check are ordered atomics in
// the Swift runtime, which ThreadSanitizer does not instrument, so it reports the reuse
// as racing with the task's earlier read of the chunk (a ByteBuffer copy in
// collect(upTo:)). Seen in two full runs, both times between those frames;
// swift-nio#2322 reports the same pair.
//
// A second, inside the demo server's HTTP/2 code (Hummingbird, the test's server, not
// Catena): a task's frame in the Swift task allocator, read by
// CheckedContinuation.resume on a NIO event loop (EventLoopFuture.get) and written
// later by HTTP2Channel.handle on a dispatch thread. The allocator reuses its slabs
// without telling ThreadSanitizer, as NIO's pool does above. Seen once in a full CI run
// (2026-11-24); matched by the server file's path, so a race in Catena's code is still
// reported.
//
// A third, the same pair outside HTTP/2: the continuation that SwiftNIO's
// EventLoopFuture.get() resumes on an event loop, read by resume, and the same slab of
// the task allocator written when another task's withUnsafeThrowingContinuation starts
// on a dispatch thread (the first full TSan run with the WebSocket suites, 2026-11-28).
// Matched by NIO's get() closure (its mangled name), which only that bridge has.
//
// A fourth, the same slab reuse with Catena's own bridge: UnsafeContinuation.resume
// (Failure == Never) reading the continuation's context on an event loop (a WebSocket
// frame handed to its waiting reader), then a later task's withUnsafeContinuation
// writing that slab on a dispatch thread (CI's TSan run, 2026-11-28, twice in one run).
// Matched by that resume's mangled name, without its leading $ (an anchor to TSan): it
// is the top frame of such a report and reads nothing but the task's context, so races
// in the code around it are still reported.
//
// A fifth, inside the demo server's WebSockets (Hummingbird's WSCore, the test's server,
// not Catena, whose client uses NIOWebSocket alone): a frame NIO's decoder made on an
// event loop, read by WSCore's inbound stream in a task (WebSocketDataFrame(from:)),
// handed over by code ThreadSanitizer does not see order. Seen once, in a fresh-clone
// CI run (2026-11-29). Matched by WSCore's file, which only the server runs.
__attribute__((no_sanitize("thread")))
const char *__tsan_default_suppressions(void) {
    return "race:NIOPooledRecvBufferAllocator\n"
           "race:HummingbirdHTTP2/HTTP2Channel.swift\n"
           "race:EventLoopFutureC3getxyYaKFySccyAA14UnsafeTransfer\n"
           "race:Scc6resume9returningyxn_ts5NeverORs_rlF\n"
           "race:WSCore/WebSocketDataFrame.swift\n";
}
