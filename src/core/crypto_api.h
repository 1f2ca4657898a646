// The libcrypto functions Berth uses (SHA-256 and HMAC-SHA256), resolved on first use (see
// core/dynlib.h). Internal to core/: core/sha256.h is what the rest of Berth calls.
#pragma once

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "core/dynlib.h"

namespace berth {

/// The functions, each resolved by its own name when the struct is built.
struct CryptoApi {
  // SHA-256 (core/sha256.cc).
  BERTH_LAZY_FUNCTION(libcrypto(), md_ctx_new, EVP_MD_CTX_new);
  BERTH_LAZY_FUNCTION(libcrypto(), md_ctx_free, EVP_MD_CTX_free);
  BERTH_LAZY_FUNCTION(libcrypto(), sha256, EVP_sha256);
  BERTH_LAZY_FUNCTION(libcrypto(), digest_init, EVP_DigestInit_ex);
  BERTH_LAZY_FUNCTION(libcrypto(), digest_update, EVP_DigestUpdate);
  BERTH_LAZY_FUNCTION(libcrypto(), digest_final, EVP_DigestFinal_ex);
  // HMAC-SHA256 (core/sha256.cc).
  BERTH_LAZY_FUNCTION(libcrypto(), hmac, HMAC);
};

/// The functions, loading libcrypto the first time.
const CryptoApi& crypto_api();

}  // namespace berth
