// JSON Web Tokens as berthd checks them: compact JWS (RFC 7515) signed with RS256 or ES256
// (RFC 7518), keys from a JWKS (RFC 7517), and the claims an OIDC access token must carry.
//
// Only the two asymmetric algorithms are ever accepted: "none" and every HS* are refused before
// any key is looked at, so an HMAC signature made with an issuer's public key (the classic key
// confusion) can never verify, and each key is bound to its type: an RSA key verifies RS256 only,
// a P-256 key ES256 only.
#pragma once

#include <openssl/evp.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/base64.h"  // a token's three parts are base64url
#include "core/error.h"

namespace berth::gateway {

/// A public key from a JWKS.
struct Jwk {
  std::string kid;
  std::string alg;  ///< "RS256" or "ES256": the only algorithm this key verifies
  std::shared_ptr<EVP_PKEY> key;
};

/// The usable keys of a JWKS document fetched from `url` (named in errors): RSA keys of at
/// least 2048 bits (RS256) and P-256 EC keys (ES256) with a kid; keys marked for another use
/// ("use" other than "sig") or another algorithm are left out. Errors when the document is not
/// a JWKS.
Result<std::vector<Jwk>> parse_jwks(std::string_view text, const std::string& url);

/// A compact JWS split and decoded, not yet verified.
struct Jws {
  nlohmann::json header;
  nlohmann::json payload;
  std::string signing_input;  ///< "HEADER.PAYLOAD" as received
  std::string signature;      ///< raw bytes
  std::string alg;            ///< header's alg
  std::string kid;            ///< header's kid, "" when absent
};

/// Splits and decodes `token`; refuses anything but three base64url parts holding JSON
/// objects, and any alg but RS256 and ES256.
Result<Jws> parse_jws(std::string_view token);

/// Whether `jws` is signed by `key` (whose alg must be the token's).
Status verify_signature(const Jws& jws, const Jwk& key);

/// What an access token's claims must satisfy.
struct ClaimRules {
  std::string issuer;          ///< exact `iss`
  std::string audience;        ///< must be `aud` or one of its entries
  std::string required_scope;  ///< in `scope` (space-separated) or `scp`; "" for none
  int64_t leeway_s = 60;       ///< on exp and nbf
};

/// Claim `name` as a NumericDate (RFC 7519 section 2), in whole seconds, into `out`; false when
/// it is absent or not a number.
bool numeric_date(const nlohmann::json& claims, const char* name, int64_t& out);

/// Checks `claims` against `rules` at Unix time `now`: iss exact; aud present and naming the
/// audience; exp present and not passed; nbf, when present, reached; sub a non-empty string;
/// the required scope present.
Status check_claims(const nlohmann::json& claims, const ClaimRules& rules, int64_t now);

}  // namespace berth::gateway
