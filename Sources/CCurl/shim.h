// CCurl: Debian's libcurl headers for Swift. Only the wrapper module of this library imports it.
#pragma once
#include <curl/curl.h>
