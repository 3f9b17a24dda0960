// CCBOR: Debian's libcbor headers for Swift. Only the wrapper module of this library imports it.
#pragma once
#include <cbor.h>
