// CCurl: Debian's libcurl headers for Swift. Only the wrapper module of this library imports it.
//
// curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call: each wrapper below fixes
// one argument type so the compiler passes it exactly as libcurl reads it back with va_arg.
#pragma once
#include <curl/curl.h>

/// The shape libcurl expects for CURLOPT_WRITEFUNCTION and CURLOPT_HEADERFUNCTION.
typedef size_t (*CGatewayCurl_WriteCallback)(char *data, size_t size, size_t count, void *userdata);

/// For options of type long (CURLOPTTYPE_LONG / CURLOPTTYPE_VALUES).
static inline CURLcode CGatewayCurl_setoptLong(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

/// For options of type curl_off_t (CURLOPTTYPE_OFF_T).
static inline CURLcode CGatewayCurl_setoptOffT(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

/// For string options; libcurl copies the string (except CURLOPT_POSTFIELDS, which we never use).
static inline CURLcode CGatewayCurl_setoptString(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

/// For object pointers (userdata, curl_slist, error buffer).
static inline CURLcode CGatewayCurl_setoptPointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

/// For CURLOPT_WRITEFUNCTION and CURLOPT_HEADERFUNCTION.
static inline CURLcode CGatewayCurl_setoptWriteFunction(CURL *handle, CURLoption option,
                                                        CGatewayCurl_WriteCallback callback) {
    return curl_easy_setopt(handle, option, callback);
}

/// For CURLINFO values of type long (CURLINFO_RESPONSE_CODE, ...).
static inline CURLcode CGatewayCurl_getinfoLong(CURL *handle, CURLINFO info, long *out) {
    return curl_easy_getinfo(handle, info, out);
}
