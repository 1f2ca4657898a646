// Token parsing and verification with libcrypto (OpenSSL 3's EVP interface: keys are built from
// the JWK's parameters with EVP_PKEY_fromdata, signatures checked with EVP_DigestVerify).
#include "gateway/jwt.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/param_build.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "core/json.h"
#include "core/scope_guard.h"

namespace berth::gateway {
namespace {

/// The smallest RSA key accepted (NIST SP 800-57: 2048 bits).
constexpr int kMinRsaBits = 2048;
/// The largest token accepted: far above any real access token (a few KiB).
constexpr size_t kMaxTokenBytes = size_t{64} * 1024;

Error token_error(std::string detail) {
  return make_error("verify token", "", std::move(detail), ErrorCode::kPermission);
}

using Bignum = std::unique_ptr<BIGNUM, decltype(&BN_free)>;
Bignum bignum(std::string_view bytes) {
  return {BN_bin2bn(reinterpret_cast<const unsigned char*>(bytes.data()),
                    static_cast<int>(bytes.size()), nullptr),
          &BN_free};
}

/// A public key of `type` ("RSA", "EC") from the parameters `push` adds to a builder.
template <class Push>
std::shared_ptr<EVP_PKEY> key_from_params(const char* type, Push push) {
  OSSL_PARAM_BLD* bld = OSSL_PARAM_BLD_new();
  if (bld == nullptr) return nullptr;
  auto free_bld = on_scope_exit([&] { OSSL_PARAM_BLD_free(bld); });
  if (!push(bld)) return nullptr;
  OSSL_PARAM* params = OSSL_PARAM_BLD_to_param(bld);
  if (params == nullptr) return nullptr;
  auto free_params = on_scope_exit([&] { OSSL_PARAM_free(params); });
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_from_name(nullptr, type, nullptr);
  if (ctx == nullptr) return nullptr;
  auto free_ctx = on_scope_exit([&] { EVP_PKEY_CTX_free(ctx); });
  EVP_PKEY* pkey = nullptr;
  if (EVP_PKEY_fromdata_init(ctx) != 1 ||
      EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) != 1)
    return nullptr;
  return {pkey, &EVP_PKEY_free};
}

/// The base64url member `name` of a JWK, decoded; "" when absent or not base64url.
std::string jwk_bytes(const nlohmann::json& jwk, const char* name) {
  auto bytes = base64url_decode(string_field(jwk, name));
  return bytes ? *bytes : "";
}

std::shared_ptr<EVP_PKEY> rsa_key(const nlohmann::json& jwk) {
  std::string n = jwk_bytes(jwk, "n"), e = jwk_bytes(jwk, "e");
  if (n.empty() || e.empty()) return nullptr;
  Bignum bn_n = bignum(n), bn_e = bignum(e);
  if (!bn_n || !bn_e) return nullptr;
  auto key = key_from_params("RSA", [&](OSSL_PARAM_BLD* b) {
    return OSSL_PARAM_BLD_push_BN(b, OSSL_PKEY_PARAM_RSA_N, bn_n.get()) == 1 &&
           OSSL_PARAM_BLD_push_BN(b, OSSL_PKEY_PARAM_RSA_E, bn_e.get()) == 1;
  });
  if (key && EVP_PKEY_get_bits(key.get()) < kMinRsaBits) return nullptr;
  return key;
}

std::shared_ptr<EVP_PKEY> p256_key(const nlohmann::json& jwk) {
  if (string_field(jwk, "crv") != "P-256") return nullptr;
  std::string x = jwk_bytes(jwk, "x"), y = jwk_bytes(jwk, "y");
  if (x.size() != 32 || y.size() != 32) return nullptr;
  std::string point = "\x04" + x + y;  // uncompressed (SEC 1)
  return key_from_params("EC", [&](OSSL_PARAM_BLD* b) {
    return OSSL_PARAM_BLD_push_utf8_string(b, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) == 1 &&
           OSSL_PARAM_BLD_push_octet_string(b, OSSL_PKEY_PARAM_PUB_KEY, point.data(),
                                            point.size()) == 1;
  });
}

/// ES256's raw r||s (RFC 7518 section 3.4) as the DER ECDSA-Sig-Value libcrypto verifies; ""
/// when it is not 64 bytes.
std::string es256_der(std::string_view raw) {
  if (raw.size() != 64) return "";
  ECDSA_SIG* sig = ECDSA_SIG_new();
  if (sig == nullptr) return "";
  auto free_sig = on_scope_exit([&] { ECDSA_SIG_free(sig); });
  BIGNUM* r = BN_bin2bn(reinterpret_cast<const unsigned char*>(raw.data()), 32, nullptr);
  BIGNUM* s = BN_bin2bn(reinterpret_cast<const unsigned char*>(raw.data()) + 32, 32, nullptr);
  if (r == nullptr || s == nullptr || ECDSA_SIG_set0(sig, r, s) != 1) {
    BN_free(r);
    BN_free(s);
    return "";
  }
  int len = i2d_ECDSA_SIG(sig, nullptr);
  if (len <= 0) return "";
  std::string der(static_cast<size_t>(len), '\0');
  auto* p = reinterpret_cast<unsigned char*>(der.data());
  if (i2d_ECDSA_SIG(sig, &p) != len) return "";
  return der;
}

bool has_scope(const nlohmann::json& claims, const std::string& scope) {
  auto scp = claims.find("scp");
  if (scp != claims.end() && scp->is_array())
    for (const auto& s : *scp)
      if (s.is_string() && s.get<std::string>() == scope) return true;
  std::string text = string_field(claims, "scope");
  size_t at = 0;
  while (at <= text.size()) {
    size_t end = text.find(' ', at);
    if (end == std::string::npos) end = text.size();
    if (text.compare(at, end - at, scope) == 0 && end - at == scope.size()) return true;
    at = end + 1;
  }
  return false;
}

}  // namespace

bool numeric_date(const nlohmann::json& claims, const char* name, int64_t& out) {
  auto it = claims.find(name);
  if (it == claims.end() || !it->is_number()) return false;
  double v = it->get<double>();
  if (!std::isfinite(v) || std::fabs(v) > 1e15) return false;
  out = static_cast<int64_t>(v);
  return true;
}

Result<std::vector<Jwk>> parse_jwks(std::string_view text, const std::string& url) {
  nlohmann::json doc = BERTH_TRY(parse_json(text, "JWKS " + url, 1 << 20));
  auto keys = doc.is_object() ? doc.find("keys") : doc.end();
  if (!doc.is_object() || keys == doc.end() || !keys->is_array())
    return make_error("read JWKS", url, "not a JWK set: no \"keys\" list",
                      ErrorCode::kInvalidInput);
  std::vector<Jwk> out;
  for (const nlohmann::json& k : *keys) {
    if (!k.is_object()) continue;
    std::string kty = string_field(k, "kty"), alg = string_field(k, "alg");
    std::string use = string_field(k, "use"), kid = string_field(k, "kid");
    if (kid.empty() || (!use.empty() && use != "sig")) continue;
    Jwk jwk{kid, "", nullptr};
    if (kty == "RSA" && (alg.empty() || alg == "RS256")) {
      jwk.alg = "RS256";
      jwk.key = rsa_key(k);
    } else if (kty == "EC" && (alg.empty() || alg == "ES256")) {
      jwk.alg = "ES256";
      jwk.key = p256_key(k);
    }
    if (jwk.key) out.push_back(std::move(jwk));
  }
  return out;
}

Result<Jws> parse_jws(std::string_view token) {
  if (token.size() > kMaxTokenBytes) return token_error("the token is longer than 64 KiB");
  size_t dot1 = token.find('.');
  size_t dot2 = dot1 == std::string_view::npos ? dot1 : token.find('.', dot1 + 1);
  if (dot2 == std::string_view::npos || token.find('.', dot2 + 1) != std::string_view::npos)
    return token_error("not a signed JWT (three base64url parts joined by dots)");
  Jws jws;
  auto header = base64url_decode(token.substr(0, dot1));
  auto payload = base64url_decode(token.substr(dot1 + 1, dot2 - dot1 - 1));
  auto sig = base64url_decode(token.substr(dot2 + 1));
  if (!header || !payload || !sig) return token_error("not a signed JWT: a part is not base64url");
  jws.header = parse_json_or_discarded(*header, kMaxTokenBytes);
  jws.payload = parse_json_or_discarded(*payload, kMaxTokenBytes);
  if (!jws.header.is_object() || !jws.payload.is_object())
    return token_error("not a signed JWT: its header or claims are not a JSON object");
  jws.alg = string_field(jws.header, "alg");
  jws.kid = string_field(jws.header, "kid");
  if (jws.alg != "RS256" && jws.alg != "ES256")
    return token_error("algorithm \"" + jws.alg + "\" is not accepted (only RS256 and ES256)");
  if (jws.header.contains("crit"))
    return token_error("the token names critical header extensions, which berthd does not know");
  jws.signing_input = std::string(token.substr(0, dot2));
  jws.signature = std::move(*sig);
  return jws;
}

Status verify_signature(const Jws& jws, const Jwk& key) {
  if (jws.alg != key.alg || !key.key)
    return token_error("key \"" + key.kid + "\" is for " + key.alg + ", not " + jws.alg);
  std::string der;
  std::string_view sig = jws.signature;
  if (jws.alg == "ES256") {
    der = es256_der(jws.signature);
    if (der.empty()) return token_error("the signature is not an ES256 signature");
    sig = der;
  }
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  if (ctx == nullptr) return token_error("out of memory");
  auto free_ctx = on_scope_exit([&] { EVP_MD_CTX_free(ctx); });
  if (EVP_DigestVerifyInit(ctx, nullptr, EVP_sha256(), nullptr, key.key.get()) != 1 ||
      EVP_DigestVerify(ctx, reinterpret_cast<const unsigned char*>(sig.data()), sig.size(),
                       reinterpret_cast<const unsigned char*>(jws.signing_input.data()),
                       jws.signing_input.size()) != 1)
    return token_error("the signature does not verify with key \"" + key.kid + "\"");
  return {};
}

Status check_claims(const nlohmann::json& claims, const ClaimRules& rules, int64_t now) {
  if (string_field(claims, "iss") != rules.issuer)
    return token_error("issuer \"" + string_field(claims, "iss") + "\" is not \"" + rules.issuer +
                       "\"");
  bool aud_ok = false;
  auto aud = claims.find("aud");
  if (aud != claims.end() && aud->is_string()) aud_ok = aud->get<std::string>() == rules.audience;
  if (aud != claims.end() && aud->is_array())
    aud_ok = std::any_of(aud->begin(), aud->end(), [&](const nlohmann::json& a) {
      return a.is_string() && a.get<std::string>() == rules.audience;
    });
  if (!aud_ok) return token_error("the token's audience does not name \"" + rules.audience + "\"");
  int64_t exp = 0, nbf = 0;
  if (!numeric_date(claims, "exp", exp)) return token_error("the token has no expiry (exp)");
  if (now > exp + rules.leeway_s) return token_error("the token has expired");
  if (claims.contains("nbf")) {
    if (!numeric_date(claims, "nbf", nbf)) return token_error("the token's nbf is not a time");
    if (now + rules.leeway_s < nbf) return token_error("the token is not valid yet (nbf)");
  }
  if (string_field(claims, "sub").empty()) return token_error("the token has no subject (sub)");
  if (!rules.required_scope.empty() && !has_scope(claims, rules.required_scope))
    return token_error("the token lacks scope \"" + rules.required_scope + "\"");
  return {};
}

}  // namespace berth::gateway
