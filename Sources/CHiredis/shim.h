// CHiredis: Debian's hiredis headers for Swift. Only the wrapper module of this library imports it. The gateway
// uses hiredis's command formatting and reply reader; the bytes travel over its own sockets (and TLS).
#pragma once
#include <hiredis/hiredis.h>

/// The reader's error string (a fixed C array in the struct; set once redisReaderGetReply returned REDIS_ERR).
static inline const char *chiredis_reader_errstr(const redisReader *r) { return r->errstr; }
