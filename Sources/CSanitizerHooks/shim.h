// CSanitizerHooks: ThreadSanitizer's annotation entry points, for `AnnotatedMutex` (GatewayCore). Declared weak: the
// symbols exist only when the ThreadSanitizer runtime is linked (`swift build --sanitize=thread`); in every other
// build they resolve to null and each hook is one compare and branch. See docs/hardening.md "Sanitizers".
#pragma once

void __tsan_acquire(void *addr) __attribute__((weak));
void __tsan_release(void *addr) __attribute__((weak));

/// Tells ThreadSanitizer that this thread now holds the lock at `addr` (everything its last holder did before
/// `CSanitizerHooks_release` happens before what follows).
static inline void CSanitizerHooks_acquire(const void *addr) {
    if (__tsan_acquire) __tsan_acquire((void *)addr);
}

/// Tells ThreadSanitizer that this thread is about to give up the lock at `addr`.
static inline void CSanitizerHooks_release(const void *addr) {
    if (__tsan_release) __tsan_release((void *)addr);
}
