// CSQLite: Debian's sqlite3 headers for Swift. Only the wrapper module of this library imports it.
#pragma once
#include <sqlite3.h>
