// COpenSSL: Debian's openssl headers for Swift. Only the wrapper module of this library imports it.
#pragma once
#include <openssl/ssl.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/err.h>
#include <openssl/rsa.h>
#include <openssl/core_names.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/bn.h>
#include <openssl/rand.h>

// Function-like and composite macros that Swift does not import.

/// EVP_PKEY_PUBLIC_KEY selection for EVP_PKEY_fromdata.
static inline int shim_EVP_PKEY_PUBLIC_KEY(void) { return EVP_PKEY_PUBLIC_KEY; }

/// BIO_get_mem_data: the bytes written so far to a memory BIO.
static inline long shim_BIO_get_mem_data(BIO *bio, char **data) { return BIO_get_mem_data(bio, data); }

/// BN_num_bytes.
static inline int shim_BN_num_bytes(const BIGNUM *bn) { return BN_num_bytes(bn); }

/// Parameter names as static C strings. OSSL_PARAM_BLD_push_* keeps the key *pointer* until OSSL_PARAM_BLD_to_param,
/// so a temporary C string bridged from a Swift String would dangle; these live for the whole process.
static inline const char *shim_OSSL_PKEY_PARAM_RSA_N(void) { return OSSL_PKEY_PARAM_RSA_N; }
static inline const char *shim_OSSL_PKEY_PARAM_RSA_E(void) { return OSSL_PKEY_PARAM_RSA_E; }

// X.509 chain building (App Attest). The sk_X509_* names are type-safe macro/inline wrappers over OPENSSL_sk_*.
#include <openssl/x509_vfy.h>
#include <openssl/ec.h>
// Certificate issuing (GatewayTestSupport's simulated App Attest CA): X509V3_EXT_nconf_nid, X509V3_CTX.
#include <openssl/x509v3.h>

/// sk_X509_new_null: an empty certificate stack (the untrusted intermediates).
static inline STACK_OF(X509) *shim_sk_X509_new_null(void) { return sk_X509_new_null(); }
/// sk_X509_push: appends without taking a reference; the caller keeps owning `cert`.
static inline int shim_sk_X509_push(STACK_OF(X509) *stack, X509 *cert) { return sk_X509_push(stack, cert); }
/// sk_X509_free: frees the stack only, not the certificates in it.
static inline void shim_sk_X509_free(STACK_OF(X509) *stack) { sk_X509_free(stack); }
/// OSSL_PKEY_PARAM_PUB_KEY ("pub"): an EC key's encoded public point.
static inline const char *shim_OSSL_PKEY_PARAM_PUB_KEY(void) { return OSSL_PKEY_PARAM_PUB_KEY; }
/// OSSL_PKEY_PARAM_GROUP_NAME ("group"): an EC key's curve name.
static inline const char *shim_OSSL_PKEY_PARAM_GROUP_NAME(void) { return OSSL_PKEY_PARAM_GROUP_NAME; }

// CMS SignedData (App Attest receipts) and ASN.1 SET/SEQUENCE OF ANY (the receipt payload).
#include <openssl/cms.h>
#include <openssl/asn1.h>

/// sk_ASN1_TYPE_num / sk_ASN1_TYPE_value over an ASN1_SEQUENCE_ANY (STACK_OF(ASN1_TYPE)).
static inline int shim_sk_ASN1_TYPE_num(const STACK_OF(ASN1_TYPE) *stack) { return sk_ASN1_TYPE_num(stack); }
static inline ASN1_TYPE *shim_sk_ASN1_TYPE_value(const STACK_OF(ASN1_TYPE) *stack, int i) { return sk_ASN1_TYPE_value(stack, i); }
/// Frees the stack and every ASN1_TYPE in it.
static inline void shim_sk_ASN1_TYPE_pop_free(STACK_OF(ASN1_TYPE) *stack) { sk_ASN1_TYPE_pop_free(stack, ASN1_TYPE_free); }
/// The ASN1_STRING inside an ASN1_TYPE of string-like type (SEQUENCE, OCTET STRING, INTEGER …), or NULL.
static inline const ASN1_STRING *shim_ASN1_TYPE_string(const ASN1_TYPE *t) {
    switch (t->type) {
    case V_ASN1_SEQUENCE: return t->value.sequence;
    case V_ASN1_OCTET_STRING: return t->value.octet_string;
    case V_ASN1_INTEGER: return t->value.integer;
    case V_ASN1_UTF8STRING: return t->value.utf8string;
    default: return NULL;
    }
}

// TLS over memory BIOs (the event loops drive it): macros Swift cannot import.
/// SSL_CTX_set_min_proto_version / _max_.
static inline int shim_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int v) { return SSL_CTX_set_min_proto_version(ctx, v); }
static inline int shim_SSL_CTX_set_max_proto_version(SSL_CTX *ctx, int v) { return SSL_CTX_set_max_proto_version(ctx, v); }
/// SSL_set_tlsext_host_name (SNI, client side).
static inline int shim_SSL_set_tlsext_host_name(SSL *ssl, const char *name) { return SSL_set_tlsext_host_name(ssl, name); }
/// BIO_ctrl_pending: ciphertext waiting to be sent.
static inline size_t shim_BIO_ctrl_pending(BIO *bio) { return BIO_ctrl_pending(bio); }
/// The ALPN select callback's type, for Swift's @convention(c) closure.
typedef int (*shim_alpn_select_cb)(SSL *, const unsigned char **, unsigned char *, const unsigned char *, unsigned int, void *);
static inline void shim_SSL_CTX_set_alpn_select_cb(SSL_CTX *ctx, shim_alpn_select_cb cb, void *arg) { SSL_CTX_set_alpn_select_cb(ctx, cb, arg); }
/// SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE (composite macros Swift does not import).
static inline uint64_t shim_SSL_server_options(void) { return SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE; }
