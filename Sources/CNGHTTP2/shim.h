// CNGHTTP2: Debian's libnghttp2 headers for Swift. Only the wrapper module of this library imports it.
#pragma once
#include <nghttp2/nghttp2.h>
