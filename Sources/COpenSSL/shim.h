// COpenSSL: Debian's openssl headers for Swift. Only the wrapper module of this library imports it.
#pragma once
#include <openssl/ssl.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/err.h>
