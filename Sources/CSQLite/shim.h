// CSQLite: Debian's sqlite3 headers for Swift. Only the wrapper module of this library imports it.
#pragma once
#include <sqlite3.h>

/// SQLITE_TRANSIENT is a cast macro Swift cannot import: SQLite copies the bound bytes before the call returns.
static inline sqlite3_destructor_type CSQLite_transient(void) { return SQLITE_TRANSIENT; }
