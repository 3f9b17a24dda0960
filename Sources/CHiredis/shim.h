// CHiredis: Debian's hiredis headers for Swift. Only the wrapper module of this library imports it.
#pragma once
#include <errno.h>
#include <sys/time.h>
#include <hiredis/hiredis.h>

/// A struct timeval of `ms` milliseconds (at least 1 ms: a zero timeout means "block forever" to the kernel).
static inline struct timeval chiredis_timeval_ms(long ms) {
    if (ms < 1) ms = 1;
    struct timeval tv;
    tv.tv_sec = ms / 1000;
    tv.tv_usec = (ms % 1000) * 1000;
    return tv;
}

/// The context's error string (a fixed C array, awkward to reach from Swift).
static inline const char *chiredis_errstr(const redisContext *c) { return c->errstr; }

/// The context's error flags (REDIS_ERR_IO, REDIS_ERR_EOF, …; 0 when none).
static inline int chiredis_err(const redisContext *c) { return c->err; }

/// Whether the last failed call on this thread was a socket timeout (SO_RCVTIMEO/SO_SNDTIMEO or connect).
static inline int chiredis_errno_is_timeout(void) {
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == ETIMEDOUT;
}
