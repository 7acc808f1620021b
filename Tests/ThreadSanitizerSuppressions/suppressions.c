#include "ThreadSanitizerSuppressions.h"

// What ThreadSanitizer ignores in the test process. Its runtime calls this at start-up,
// before Swift can run (a Swift @_cdecl function crashed there), so it is C and not
// instrumented. In a build without ThreadSanitizer nothing calls it.
//
// One entry, inside SwiftNIO and never in Catena's code: NIO's pooled receive buffers.
// The event loop reuses a buffer once isKnownUniquelyReferenced says the task that
// read the last chunk has let it go. The release and that check are ordered atomics in
// the Swift runtime, which ThreadSanitizer does not instrument, so it reports the reuse
// as racing with the task's earlier read of the chunk (a ByteBuffer copy in
// collect(upTo:)). Seen in two full runs, both times between those frames;
// swift-nio#2322 reports the same pair.
__attribute__((no_sanitize("thread")))
const char *__tsan_default_suppressions(void) {
    return "race:NIOPooledRecvBufferAllocator\n";
}
