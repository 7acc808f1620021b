#ifndef THREAD_SANITIZER_SUPPRESSIONS_H
#define THREAD_SANITIZER_SUPPRESSIONS_H

/// The suppressions ThreadSanitizer reads at start-up (see suppressions.c).
const char *__tsan_default_suppressions(void);

#endif
