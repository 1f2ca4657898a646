// berthd's token validation and identity mapping (gateway/jwt.h, gateway/auth.h): every
// attack the issue lists, as a table, against two trusted issuers whose discovery documents and
// JWKS a fake fetcher serves; keys are made here with libcrypto.
#include <gtest/gtest.h>
#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include <map>
#include <memory>
#include <string>

#include "gateway/auth.h"
#include "gateway/config.h"
#include "gateway/jwt.h"
#include "test_util.h"

namespace berth::gateway {
namespace {

using json = nlohmann::json;

constexpr int64_t kNow = 1'800'000'000;
const char* const kIssA = "https://iam.example.org/";
const char* const kIssB = "https://checkin.example.eu/auth/realms/egi";

std::string bn_bytes(EVP_PKEY* k, const char* name) {
  BIGNUM* bn = nullptr;
  EVP_PKEY_get_bn_param(k, name, &bn);
  std::string out(static_cast<size_t>(BN_num_bytes(bn)), '\0');
  BN_bn2bin(bn, reinterpret_cast<unsigned char*>(out.data()));
  BN_free(bn);
  return out;
}

/// A signing key and its public JWK.
struct TestKey {
  std::shared_ptr<EVP_PKEY> key;
  std::string kid, alg;

  static TestKey rsa(std::string kid) {
    return {std::shared_ptr<EVP_PKEY>(EVP_RSA_gen(2048), &EVP_PKEY_free), std::move(kid), "RS256"};
  }
  static TestKey p256(std::string kid) {
    return {std::shared_ptr<EVP_PKEY>(EVP_EC_gen("P-256"), &EVP_PKEY_free), std::move(kid),
            "ES256"};
  }

  json jwk() const {
    if (alg == "RS256")
      return {{"kty", "RSA"},
              {"kid", kid},
              {"use", "sig"},
              {"alg", "RS256"},
              {"n", base64url_encode(bn_bytes(key.get(), OSSL_PKEY_PARAM_RSA_N))},
              {"e", base64url_encode(bn_bytes(key.get(), OSSL_PKEY_PARAM_RSA_E))}};
    unsigned char pub[65];
    size_t len = 0;
    EVP_PKEY_get_octet_string_param(key.get(), OSSL_PKEY_PARAM_PUB_KEY, pub, sizeof pub, &len);
    std::string p(reinterpret_cast<char*>(pub), len);
    return {{"kty", "EC"},
            {"kid", kid},
            {"crv", "P-256"},
            {"x", base64url_encode(p.substr(1, 32))},
            {"y", base64url_encode(p.substr(33, 32))}};
  }

  /// The public key as PEM: what a key-confusion attacker uses as an HMAC secret.
  std::string public_pem() const {
    BIO* bio = BIO_new(BIO_s_mem());
    PEM_write_bio_PUBKEY(bio, key.get());
    char* data = nullptr;
    long n = BIO_get_mem_data(bio, &data);
    std::string out(data, static_cast<size_t>(n));
    BIO_free(bio);
    return out;
  }

  std::string sign(const std::string& input) const {
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    EVP_DigestSignInit(ctx, nullptr, EVP_sha256(), nullptr, key.get());
    size_t len = 0;
    auto in = reinterpret_cast<const unsigned char*>(input.data());
    EVP_DigestSign(ctx, nullptr, &len, in, input.size());
    std::string sig(len, '\0');
    EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(sig.data()), &len, in, input.size());
    sig.resize(len);
    EVP_MD_CTX_free(ctx);
    if (alg == "RS256") return sig;
    // DER to JWS's raw r||s.
    auto p = reinterpret_cast<const unsigned char*>(sig.data());
    ECDSA_SIG* es = d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(sig.size()));
    std::string raw(64, '\0');
    BN_bn2binpad(ECDSA_SIG_get0_r(es), reinterpret_cast<unsigned char*>(raw.data()), 32);
    BN_bn2binpad(ECDSA_SIG_get0_s(es), reinterpret_cast<unsigned char*>(raw.data()) + 32, 32);
    ECDSA_SIG_free(es);
    return raw;
  }
};

std::string b64json(const json& j) {
  return base64url_encode(j.dump());
}

/// A token of `claims` with header `header`, signed by `key`.
std::string token(const TestKey& key, const json& claims, json header = nullptr) {
  if (header.is_null()) header = {{"alg", key.alg}, {"typ", "JWT"}, {"kid", key.kid}};
  std::string input = b64json(header) + "." + b64json(claims);
  return input + "." + base64url_encode(key.sign(input));
}

std::string hs256(const std::string& secret, const json& header, const json& claims) {
  std::string input = b64json(header) + "." + b64json(claims);
  unsigned char mac[32];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac, &len);
  return input + "." + base64url_encode(std::string(reinterpret_cast<char*>(mac), len));
}

json claims_a(const json& extra = json::object()) {
  json c = {{"iss", kIssA},      {"sub", "s-alice"}, {"aud", "berth"},
            {"exp", kNow + 600}, {"iat", kNow - 10}, {"preferred_username", "alice"}};
  c.update(extra);
  return c;
}

/// Two issuers, each with its discovery document and JWKS, served by a fake fetcher.
class GatewayAuth : public ::testing::Test {
 protected:
  void SetUp() override {
    config.issuers = {{kIssA, "berth", "", "preferred_username"}, {kIssB, "berth-egi", "", ""}};
    config.users = {{kIssB, "egi-123@egi.eu", "bob"}};
    config.admin_groups = {"/hpc/admins"};
    config.jwks_min_refresh_s = 30;
    jwks[kIssA] = {a_rsa.jwk(), a_ec.jwk()};
    jwks[kIssB] = {b_rsa.jwk()};
  }

  Fetcher fetcher() {
    return [this](const std::string& url) -> Result<std::string> {
      ++fetched[url];
      for (const char* iss : {kIssA, kIssB}) {
        std::string base = iss;
        if (base.back() == '/') base.pop_back();
        if (url == base + "/.well-known/openid-configuration")
          return json{{"issuer", iss}, {"jwks_uri", base + "/jwks"}}.dump();
        if (url == base + "/jwks") return json{{"keys", jwks[iss]}}.dump();
      }
      return http_error("GET", url, 404, "not found");
    };
  }
  static UserLookup users() {
    return [](const std::string& name) -> std::optional<std::pair<uid_t, gid_t>> {
      if (name == "alice") return std::make_pair(uid_t{1001}, gid_t{1001});
      if (name == "bob") return std::make_pair(uid_t{1002}, gid_t{1002});
      if (name == "root") return std::make_pair(uid_t{0}, gid_t{0});
      return std::nullopt;
    };
  }

  GatewayConfig config;
  TestKey a_rsa = TestKey::rsa("a-rsa-1");
  TestKey a_ec = TestKey::p256("a-ec-1");
  TestKey b_rsa = TestKey::rsa("b-rsa-1");
  std::map<std::string, json> jwks;
  std::map<std::string, int> fetched;
};

TEST_F(GatewayAuth, TokenTable) {
  Authenticator auth(config, fetcher(), users());
  json none_header = {{"alg", "none"}, {"kid", "a-rsa-1"}};
  struct Case {
    const char* name;
    std::string token;
    const char* error;  // "" when the token is valid
  };
  std::string good = token(a_rsa, claims_a());
  std::string tampered = good;
  {
    // The same signature over claims naming another user.
    size_t d1 = good.find('.'), d2 = good.rfind('.');
    tampered = good.substr(0, d1 + 1) + b64json(claims_a({{"preferred_username", "root"}})) +
               good.substr(d2);
  }
  const Case cases[] = {
      {"RS256", good, ""},
      {"ES256", token(a_ec, claims_a()), ""},
      {"audience list", token(a_rsa, claims_a({{"aud", {"other", "berth"}}})), ""},
      {"expired within leeway", token(a_rsa, claims_a({{"exp", kNow - 30}})), ""},
      {"alg none", b64json(none_header) + "." + b64json(claims_a()) + ".",
       "algorithm \"none\" is not accepted (only RS256 and ES256)"},
      {"HS256 with the RSA public key",
       hs256(a_rsa.public_pem(), {{"alg", "HS256"}, {"kid", "a-rsa-1"}}, claims_a()),
       "algorithm \"HS256\" is not accepted (only RS256 and ES256)"},
      {"expired", token(a_rsa, claims_a({{"exp", kNow - 61}})), "the token has expired"},
      {"no exp", token(a_rsa, claims_a({{"exp", nullptr}})), "the token has no expiry (exp)"},
      {"not yet valid", token(a_rsa, claims_a({{"nbf", kNow + 120}})),
       "the token is not valid yet (nbf)"},
      {"untrusted issuer", token(a_rsa, claims_a({{"iss", "https://evil.example.org/"}})),
       "issuer \"https://evil.example.org/\" is not trusted"},
      {"issuer differing in a slash", token(a_rsa, claims_a({{"iss", "https://iam.example.org"}})),
       "issuer \"https://iam.example.org\" is not trusted"},
      {"wrong audience", token(a_rsa, claims_a({{"aud", "other"}})),
       "the token's audience does not name \"berth\""},
      {"no audience", token(a_rsa, claims_a({{"aud", nullptr}})),
       "the token's audience does not name \"berth\""},
      {"unknown kid", token(TestKey::rsa("a-rsa-9"), claims_a()),
       "issuer \"https://iam.example.org/\" has no key \"a-rsa-9\""},
      {"no kid", token(a_rsa, claims_a(), {{"alg", "RS256"}}), "the token names no key (kid)"},
      {"tampered payload", tampered, "the signature does not verify with key \"a-rsa-1\""},
      {"key of another issuer, its kid", token(b_rsa, claims_a()),
       "issuer \"https://iam.example.org/\" has no key \"b-rsa-1\""},
      {"key of another issuer, this issuer's kid",
       token(b_rsa, claims_a(), {{"alg", "RS256"}, {"kid", "a-rsa-1"}}),
       "the signature does not verify with key \"a-rsa-1\""},
      {"RS256 header on the EC key",
       token(a_rsa, claims_a(), {{"alg", "RS256"}, {"kid", "a-ec-1"}}),
       "key \"a-ec-1\" is for ES256, not RS256"},
      {"no subject", token(a_rsa, claims_a({{"sub", ""}})), "the token has no subject (sub)"},
      {"two parts", "abc.def", "not a signed JWT (three base64url parts joined by dots)"},
      {"not base64url", "a+b.c.d", "not a signed JWT: a part is not base64url"},
      {"crit header",
       token(a_rsa, claims_a(), {{"alg", "RS256"}, {"kid", "a-rsa-1"}, {"crit", {"exp"}}}),
       "the token names critical header extensions, which berthd does not know"},
  };
  for (const Case& c : cases) {
    auto r = auth.verify(c.token, kNow);
    if (*c.error == '\0') {
      EXPECT_TRUE(r.ok()) << c.name << ": " << r.error().message();
    } else {
      ASSERT_FALSE(r.ok()) << c.name;
      EXPECT_EQ(r.error().detail, c.error) << c.name;
    }
  }
}

TEST_F(GatewayAuth, RequiredScope) {
  config.issuers[0].required_scope = "compute.create";
  Authenticator auth(config, fetcher(), users());
  EXPECT_TRUE(auth.verify(token(a_rsa, claims_a({{"scope", "openid compute.create"}})), kNow).ok());
  EXPECT_TRUE(auth.verify(token(a_rsa, claims_a({{"scp", {"compute.create"}}})), kNow).ok());
  auto r = auth.verify(token(a_rsa, claims_a({{"scope", "openid compute.created"}})), kNow);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().detail, "the token lacks scope \"compute.create\"");
}

TEST_F(GatewayAuth, UnknownKidRefetchesAtABoundedRate) {
  Authenticator auth(config, fetcher(), users());
  ASSERT_TRUE(auth.verify(token(a_rsa, claims_a()), kNow).ok());
  EXPECT_EQ(auth.keys().fetches(kIssA), 1);
  // A known kid never fetches again; unknown kids fetch at most once per 30 s.
  ASSERT_TRUE(auth.verify(token(a_rsa, claims_a({{"exp", kNow + 2000}})), kNow + 1000).ok());
  TestKey rotated = TestKey::rsa("a-rsa-2");
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(auth.verify(token(rotated, claims_a()), kNow + 5).ok());
  EXPECT_EQ(auth.keys().fetches(kIssA), 1);
  EXPECT_FALSE(auth.verify(token(rotated, claims_a()), kNow + 30).ok());
  EXPECT_EQ(auth.keys().fetches(kIssA), 2);
  // The issuer rotates its keys: the next allowed fetch finds the new one.
  jwks[kIssA].push_back(rotated.jwk());
  EXPECT_FALSE(auth.verify(token(rotated, claims_a()), kNow + 40).ok());
  auto r = auth.verify(token(rotated, claims_a({{"exp", kNow + 1000}})), kNow + 60);
  EXPECT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(auth.keys().fetches(kIssA), 3);
  EXPECT_EQ(auth.keys().fetches(kIssB), 0);
}

TEST_F(GatewayAuth, AVerifiedTokenIsKeptOnlyWhileItsCheckWouldStillPass) {
  bool alice_exists = true;
  UserLookup lookup = [&](const std::string& name) -> std::optional<std::pair<uid_t, gid_t>> {
    if (name == "alice" && alice_exists) return std::make_pair(uid_t{1001}, gid_t{1001});
    return std::nullopt;
  };
  Authenticator auth(config, fetcher(), lookup);
  const int64_t leeway = config.leeway_s;
  // Kept until exp and the leeway, not a second longer.
  std::string t = token(a_rsa, claims_a({{"exp", kNow + 100}}));
  ASSERT_TRUE(auth.verify(t, kNow).ok());
  EXPECT_TRUE(auth.verify(t, kNow + 100 + leeway).ok());
  auto r = auth.verify(t, kNow + 101 + leeway);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().detail, "the token has expired");
  // A clock gone back checks again: nbf may not hold there.
  std::string later = token(a_rsa, claims_a({{"nbf", kNow + 200}, {"exp", kNow + 1000}}));
  EXPECT_FALSE(auth.verify(later, kNow).ok());
  ASSERT_TRUE(auth.verify(later, kNow + 200).ok());
  r = auth.verify(later, kNow);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().detail, "the token is not valid yet (nbf)");
  // The account is looked up for every request, the token kept or not.
  ASSERT_TRUE(std::holds_alternative<Account>(auth.authenticate("Bearer " + later, kNow + 300)));
  alice_exists = false;
  auto who = auth.authenticate("Bearer " + later, kNow + 301);
  ASSERT_TRUE(std::holds_alternative<AuthFailure>(who));
  EXPECT_EQ(std::get<AuthFailure>(who).status, 403);
  alice_exists = true;
  // The issuer withdraws a-rsa-1: once its keys are fetched again, a token kept as verified
  // with that key is refused like any other signed with it.
  ASSERT_TRUE(auth.verify(later, kNow + 400).ok());
  TestKey rotated = TestKey::rsa("a-rsa-2");
  jwks[kIssA] = {rotated.jwk()};
  ASSERT_TRUE(auth.verify(token(rotated, claims_a({{"exp", kNow + 1000}})), kNow + 400).ok());
  EXPECT_EQ(auth.keys().fetches(kIssA), 2);
  r = auth.verify(later, kNow + 401);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().detail, "issuer \"https://iam.example.org/\" has no key \"a-rsa-1\"");
}

TEST_F(GatewayAuth, AnIssuerThatIsDownIsNotAskedOnEveryRequest) {
  int calls = 0;
  Fetcher down = [&](const std::string& url) -> Result<std::string> {
    ++calls;
    return make_error("GET", url, "Connection", ErrorCode::kNetwork);
  };
  Authenticator auth(config, down, users());
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(auth.verify(token(a_rsa, claims_a()), kNow + i).ok());
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(auth.verify(token(a_rsa, claims_a()), kNow + 30).ok());
  EXPECT_EQ(calls, 2);
}

TEST_F(GatewayAuth, DiscoveryNamingAnotherIssuerIsRefused) {
  Fetcher lying = [](const std::string& url) -> Result<std::string> {
    if (url.ends_with("openid-configuration"))
      return json{{"issuer", "https://evil.example.org/"}, {"jwks_uri", "https://evil/jwks"}}
          .dump();
    return http_error("GET", url, 404, "not found");
  };
  Authenticator auth(config, lying, users());
  auto r = auth.verify(token(a_rsa, claims_a()), kNow);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().detail,
            "the keys of issuer \"https://iam.example.org/\" cannot be read: discover issuer "
            "https://iam.example.org/.well-known/openid-configuration: names issuer "
            "\"https://evil.example.org/\", not \"https://iam.example.org/\"");
}

TEST_F(GatewayAuth, Mapping) {
  Authenticator auth(config, fetcher(), users());
  struct Case {
    const char* name;
    std::string authorization;
    int status;  // 0: mapped
    const char* user_or_error;
  };
  auto b = [](const char* sub) {
    return json{{"iss", kIssB}, {"aud", "berth-egi"}, {"exp", kNow + 60}, {"sub", sub}};
  };
  const Case cases[] = {
      {"username claim", "Bearer " + token(a_rsa, claims_a()), 0, "alice"},
      {"scheme in lower case", "bearer " + token(a_rsa, claims_a()), 0, "alice"},
      {"table row", "Bearer " + token(b_rsa, b("egi-123@egi.eu")), 0, "bob"},
      {"no header", "", 401, "no bearer token"},
      {"basic auth", "Basic YWxpY2U6eA==", 401, "the Authorization header is not a bearer token"},
      {"invalid token", "Bearer x.y.z", 401, "not a signed JWT: a part is not base64url"},
      {"no local account", "Bearer " + token(a_rsa, claims_a({{"preferred_username", "mallory"}})),
       403,
       "subject \"s-alice\" of \"https://iam.example.org/\" maps to \"mallory\", which is "
       "not a local account"},
      {"root", "Bearer " + token(a_rsa, claims_a({{"preferred_username", "root"}})), 403,
       "subject \"s-alice\" of \"https://iam.example.org/\" maps to \"root\", which is root: jobs "
       "never run as root"},
      {"not in the table", "Bearer " + token(b_rsa, b("egi-999@egi.eu")), 403,
       "subject \"egi-999@egi.eu\" of \"https://checkin.example.eu/auth/realms/egi\" has no "
       "local account"},
      {"no username claim", "Bearer " + token(a_rsa, claims_a({{"preferred_username", nullptr}})),
       403,
       "subject \"s-alice\" of \"https://iam.example.org/\" has no local account: not in "
       "[[users]] and the token has no \"preferred_username\" claim"},
  };
  for (const Case& c : cases) {
    auto r = auth.authenticate(c.authorization, kNow);
    if (c.status == 0) {
      ASSERT_TRUE(std::holds_alternative<Account>(r))
          << c.name << ": " << std::get<AuthFailure>(r).message;
      EXPECT_EQ(std::get<Account>(r).user, c.user_or_error) << c.name;
    } else {
      ASSERT_TRUE(std::holds_alternative<AuthFailure>(r)) << c.name;
      EXPECT_EQ(std::get<AuthFailure>(r).status, c.status) << c.name;
      EXPECT_EQ(std::get<AuthFailure>(r).message, c.user_or_error) << c.name;
    }
  }
}

TEST(GatewayGroups, FromEveryGroupClaimAndAdminFromAGroup) {
  json claims = {{"sub", "s"},
                 {"preferred_username", "alice"},
                 {"groups", {"/hpc", "/hpc/admins"}},
                 {"wlcg.groups", {"/hpc", "/wlcg/prod"}},
                 {"eduperson_entitlement", "urn:mace:egi.eu:group:gpu:role=member#aai.egi.eu"}};
  EXPECT_EQ(token_groups(claims),
            (std::vector<std::string>{"/hpc", "/hpc/admins", "/wlcg/prod", "/gpu"}));
  GatewayConfig config;
  IssuerConfig iss{kIssA, "berth", "", "preferred_username"};
  UserLookup lookup = [](const std::string&) { return std::make_pair(uid_t{1001}, gid_t{100}); };
  auto a = map_identity(claims, iss, config, lookup);
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(a->admin);
  config.admin_groups = {"/gpu"};
  a = map_identity(claims, iss, config, lookup);
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->admin);
  EXPECT_EQ(a->uid, 1001u);
  EXPECT_EQ(a->gid, 100u);
}

TEST(GatewayGroups, AarcEntitlementsAreTheGroupTheyName) {
  struct Case {
    const char* urn;
    std::optional<std::string> group;
  };
  const Case cases[] = {
      {"urn:geant:example.org:group:gpu-vo:role=member#aai.example.org", "/gpu-vo"},
      {"urn:geant:example.org:group:gpu-vo#aai.example.org", "/gpu-vo"},
      {"urn:geant:example.org:group:parent:child:role=manager#aai.example.org", "/parent/child"},
      {"urn:mace:egi.eu:group:vo.example.org:sub:role=member#aai.egi.eu", "/vo.example.org/sub"},
      {"URN:geant:example.org:group:gpu-vo", "/gpu-vo"},
      {"urn:mace:dir:entitlement:common-lib-terms", std::nullopt},
      {"urn:geant:example.org:group:#aai.example.org", std::nullopt},
      {"urn:geant:example.org:group:a:role=member:b#x", std::nullopt},
      {"/plain/group", std::nullopt},
  };
  for (const Case& c : cases) EXPECT_EQ(aarc_group(c.urn), c.group) << c.urn;
  json claims = {{"eduperson_entitlement",
                  {"urn:geant:example.org:group:gpu-vo:role=member#aai.example.org",
                   "urn:geant:example.org:group:gpu-vo:role=manager#aai.example.org",
                   "urn:mace:dir:entitlement:common-lib-terms"}},
                 {"groups", {"urn:geant:example.org:group:other#x"}}};
  // Only eduperson_entitlement holds entitlements; the other claims' groups are names.
  EXPECT_EQ(token_groups(claims),
            (std::vector<std::string>{"urn:geant:example.org:group:other#x", "/gpu-vo",
                                      "urn:mace:dir:entitlement:common-lib-terms"}));
}

TEST(GatewayAccounts, SystemAndServiceAccountsAreRefused) {
  GatewayConfig config;
  IssuerConfig iss{kIssA, "berth", "", "preferred_username"};
  UserLookup lookup = [](const std::string& name) -> std::optional<std::pair<uid_t, gid_t>> {
    if (name == "alice") return std::make_pair(uid_t{1001}, gid_t{1001});
    if (name == "berthd") return std::make_pair(uid_t{1500}, gid_t{1500});
    if (name == "slurm") return std::make_pair(uid_t{64030}, gid_t{64030});
    if (name == "slurmadm") return std::make_pair(uid_t{2000}, gid_t{2000});
    if (name == "daemon") return std::make_pair(uid_t{1}, gid_t{1});
    if (name == "nobody") return std::make_pair(uid_t{65534}, gid_t{65534});
    return std::nullopt;
  };
  ServiceAccounts services;
  services.own_uid = 1500;
  services.slurm_user = "slurmadm";
  services.slurm_uid = 2000;
  auto refusal = [&](const std::string& user) -> std::string {
    json claims = {{"sub", "s"}, {"preferred_username", user}};
    auto a = map_identity(claims, iss, config, lookup, services);
    return a.ok() ? "" : a.error().detail;
  };
  const std::string s = "subject \"s\" of \"" + std::string(kIssA) + "\" maps to ";
  EXPECT_EQ(refusal("alice"), "");
  EXPECT_EQ(refusal("berthd"),
            s + "\"berthd\", which is berthd's own account: jobs never run as the gateway");
  EXPECT_EQ(refusal("slurmadm"), s + "\"slurmadm\", which is Slurm's SlurmUser (\"slurmadm\" in "
                                     "slurm.conf): jobs never run as Slurm's administrator");
  EXPECT_EQ(refusal("slurm"), s + "\"slurm\", whose uid 64030 is outside [accounts] uid_min to "
                                  "uid_max (1000-60000): system accounts never run jobs");
  EXPECT_EQ(refusal("daemon"), s + "\"daemon\", whose uid 1 is outside [accounts] uid_min to "
                                   "uid_max (1000-60000): system accounts never run jobs");
  EXPECT_EQ(refusal("nobody"), s + "\"nobody\", whose uid 65534 is outside [accounts] uid_min "
                                   "to uid_max (1000-60000): system accounts never run jobs");
  EXPECT_EQ(refusal(std::string("alice\0evil", 10)),
            s + "\"alice\\x00evil\", which has control characters: not an account name");
  EXPECT_EQ(refusal("alice\n"),
            s + "\"alice\\x0a\", which has control characters: not an account name");
  config.accounts.allow_own_account = true;
  EXPECT_EQ(refusal("berthd"), "");
  config.accounts.uid_min = 1;
  config.accounts.uid_max = 65534;
  EXPECT_EQ(refusal("nobody"), "");
}

TEST(GatewayAccounts, SlurmUserFromSlurmConf) {
  TempDir dir("gw-slurmconf");
  std::string conf = dir / "slurm.conf";
  write_text(conf, "ClusterName=c\n# SlurmUser=wrong\nslurmuser = slurmadm # x\n");
  EXPECT_EQ(*read_slurm_user(conf), "slurmadm");
  write_text(conf, "ClusterName=c\n");
  EXPECT_EQ(*read_slurm_user(conf), "root");
  EXPECT_FALSE(read_slurm_user(dir / "none").ok());
}

TEST(GatewayAccounts, SlurmUserFollowsIncludeLines) {
  // Sites keep slurm.conf's parts in files of their own (Debian's configless examples, the
  // per-cluster files of a shared tree): SlurmUser may be in any of them.
  TempDir dir("gw-slurminclude");
  write_text(dir / "conf.d/10-a.conf", "SlurmUser=early\n");
  write_text(dir / "conf.d/20-b.conf", "Include ../deeper.conf\n");
  write_text(dir / "deeper.conf", "SlurmUser=slurmadm\n");
  write_text(dir / "slurm.conf", "ClusterName=c1\ninclude conf.d/*.conf\n");
  EXPECT_EQ(*read_slurm_user(dir / "slurm.conf"), "slurmadm");
  // "%c" is the cluster's name; an absolute name is taken as it is.
  write_text(dir / "c1/users.conf", "SLURMUSER = percent_c\n");
  write_text(dir / "slurm.conf",
             "ClusterName=c1\nINCLUDE\t" + (dir / "%c/users.conf") + "  # comment\n");
  EXPECT_EQ(*read_slurm_user(dir / "slurm.conf"), "percent_c");
  // The later line wins, in the order the lines are read.
  write_text(dir / "slurm.conf", "Include deeper.conf\nSlurmUser=last\n");
  EXPECT_EQ(*read_slurm_user(dir / "slurm.conf"), "last");
  // A wildcard that matches nothing is no error; a missing file is; so is a loop.
  write_text(dir / "slurm.conf", "Include none/*.conf\n");
  EXPECT_EQ(*read_slurm_user(dir / "slurm.conf"), "root");
  write_text(dir / "slurm.conf", "Include missing.conf\n");
  EXPECT_FALSE(read_slurm_user(dir / "slurm.conf").ok());
  write_text(dir / "slurm.conf", "Include slurm.conf\n");
  auto loop = read_slurm_user(dir / "slurm.conf");
  ASSERT_FALSE(loop.ok());
  EXPECT_NE(loop.error().message().find("nest deeper than 16"), std::string::npos)
      << loop.error().message();
  // "IncludeX=1" is a key, not an Include line.
  write_text(dir / "slurm.conf", "IncludeX=1\nSlurmUser=plain\n");
  EXPECT_EQ(*read_slurm_user(dir / "slurm.conf"), "plain");
}

TEST(GatewayJwt, JwksKeepsOnlyUsableKeys) {
  TestKey rsa = TestKey::rsa("r"), ec = TestKey::p256("e");
  std::shared_ptr<EVP_PKEY> small(EVP_RSA_gen(1024), &EVP_PKEY_free);
  TestKey weak{small, "weak", "RS256"};
  json enc = rsa.jwk();
  enc["kid"] = "enc";
  enc["use"] = "enc";
  json nokid = rsa.jwk();
  nokid.erase("kid");
  json hs = {{"kty", "oct"}, {"kid", "h"}, {"k", "c2VjcmV0"}};
  json p384 = ec.jwk();
  p384["kid"] = "p384";
  p384["crv"] = "P-384";
  json keys = {{"keys", {rsa.jwk(), ec.jwk(), weak.jwk(), enc, nokid, hs, p384}}};
  auto set = parse_jwks(keys.dump(), "https://x/jwks");
  ASSERT_TRUE(set.ok()) << set.error().message();
  ASSERT_EQ(set->size(), 2u);
  EXPECT_EQ((*set)[0].kid, "r");
  EXPECT_EQ((*set)[0].alg, "RS256");
  EXPECT_EQ((*set)[1].kid, "e");
  EXPECT_EQ((*set)[1].alg, "ES256");
  auto bad = parse_jwks(R"({"nokeys": []})", "https://x/jwks");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(), "read JWKS https://x/jwks: not a JWK set: no \"keys\" list");
}

TEST(GatewayBearer, TheTokenOfAnAuthorizationHeader) {
  EXPECT_EQ(bearer_token("Bearer abc"), "abc");
  EXPECT_EQ(bearer_token("bearer abc"), "abc");  // the scheme in any case
  EXPECT_EQ(bearer_token("Bearer   abc"), "abc");
  EXPECT_EQ(bearer_token("Basic abc"), std::nullopt);
  EXPECT_EQ(bearer_token("Bearer "), "");  // a bearer header, without a token
  EXPECT_EQ(bearer_token(""), std::nullopt);
}

}  // namespace
}  // namespace berth::gateway
