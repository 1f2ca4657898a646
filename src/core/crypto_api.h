// The libcrypto functions Berth uses (SHA-256 and base64), resolved on first use (see
// core/dynlib.h). Internal to Berth's sources: core/sha256.cc and image/http.cc share it.
#pragma once

#include <openssl/evp.h>

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
  // Base64 (image/http.cc).
  BERTH_LAZY_FUNCTION(libcrypto(), encode_block, EVP_EncodeBlock);
  BERTH_LAZY_FUNCTION(libcrypto(), decode_block, EVP_DecodeBlock);
};

/// The functions, loading libcrypto the first time.
const CryptoApi& crypto_api();

}  // namespace berth
