// CHiredis: Debian's hiredis headers for Swift. Only the wrapper module of this library imports it.
#pragma once
#include <hiredis/hiredis.h>
