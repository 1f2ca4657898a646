// Streaming SHA-256 (OpenSSL libcrypto) and the "sha256:<hex>" digest form
// used by the OCI specs; HMAC-SHA256.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/error.h"

namespace berth {

/// Incremental SHA-256; feed bytes with update(), read with hex_digest().
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;
  void update(const void* data, size_t len);
  void update(std::string_view s) { update(s.data(), s.size()); }
  /// Lowercase hex of the digest; the hasher cannot be fed afterwards.
  std::string hex_digest();
  /// "sha256:" + hex_digest().
  std::string digest() { return "sha256:" + hex_digest(); }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// "sha256:<hex>" of a byte string.
std::string sha256_digest(std::string_view data);
/// Hashes a whole file and returns "sha256:<hex>".
Result<std::string> sha256_file(const std::string& path);
/// HMAC-SHA256 (RFC 2104) of `data` under `key`: the 32 bytes of the MAC, raw.
std::string hmac_sha256(std::string_view key, std::string_view data);
/// Checks "algo:hex" form; only sha256 with 64 lowercase hex digits is accepted.
Status validate_digest(std::string_view digest);
/// The hex part of "sha256:<hex>" (caller validated it).
std::string_view digest_hex(std::string_view digest);

}  // namespace berth
