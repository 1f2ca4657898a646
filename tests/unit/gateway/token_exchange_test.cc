// RFC 8693 token exchange (gateway/token_exchange.h) against an issuer on loopback: the form
// the broker posts and how it authenticates, what it keeps and for how long, and its refusals.
#include "gateway/token_exchange.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "core/base64.h"
#include "fake_issuer.h"
#include "test_util.h"

namespace berth::gateway {
namespace {

constexpr int64_t kNow = 1'800'000'000;

/// The broker's secret in a file only its owner reads.
std::string secret_file(const TempDir& dir, const std::string& secret = "s3cr:t") {
  std::string path = dir.path + "/exchange.secret";
  write_text(path, secret + "\n");
  ::chmod(path.c_str(), 0600);
  return path;
}

TEST(TokenExchange, PostsAnRfc8693FormWithTheBrokersClientCredentials) {
  TempDir dir{"xchg"};
  FakeIssuer issuer;
  std::vector<IssuerConfig> issuers = {issuer.config(secret_file(dir))};
  TokenExchanger x(issuers, http_fetcher());
  const std::string caller = "caller.token+/=";
  auto token = x.exchange(issuer.url, caller, "berthd-b", kNow);
  ASSERT_TRUE(token.ok()) << token.error().message();
  EXPECT_EQ(*token, "xchg-berthd-b-1");
  ASSERT_EQ(issuer.exchanges().size(), 1u);
  const testing::FakeRequest r = issuer.exchanges()[0];
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.header("content-type"), "application/x-www-form-urlencoded");
  // RFC 6749 2.3.1: the id and secret form-encoded, then HTTP Basic.
  EXPECT_EQ(r.header("authorization"), "Basic " + base64_encode("berth%20broker:s3cr%3At"));
  EXPECT_EQ(parse_form(r.body),
            (std::map<std::string, std::string>{
                {"grant_type", "urn:ietf:params:oauth:grant-type:token-exchange"},
                {"subject_token", caller},
                {"subject_token_type", "urn:ietf:params:oauth:token-type:access_token"},
                {"audience", "berthd-b"},
                {"requested_token_type", "urn:ietf:params:oauth:token-type:access_token"}}));
  EXPECT_EQ(r.body.find('+'), std::string::npos) << r.body;  // "+/=" percent-encoded
}

TEST(TokenExchange, KeepsATokenByCallerTokenAndAudienceUntilShortlyBeforeItExpires) {
  TempDir dir{"xchg"};
  FakeIssuer issuer;
  std::vector<IssuerConfig> issuers = {issuer.config(secret_file(dir))};
  TokenExchanger x(issuers, http_fetcher());
  EXPECT_EQ(*x.exchange(issuer.url, "t1", "b", kNow), "xchg-b-1");
  EXPECT_EQ(*x.exchange(issuer.url, "t1", "b", kNow + 10), "xchg-b-1");  // kept
  EXPECT_EQ(*x.exchange(issuer.url, "t1", "c", kNow + 10), "xchg-c-2");  // another audience
  EXPECT_EQ(*x.exchange(issuer.url, "t2", "b", kNow + 10), "xchg-b-3");  // another caller
  // expires_in 300: kept until 30 s before it ends.
  EXPECT_EQ(*x.exchange(issuer.url, "t1", "b", kNow + 269), "xchg-b-1");
  EXPECT_EQ(*x.exchange(issuer.url, "t1", "b", kNow + 270), "xchg-b-4");
  EXPECT_EQ(issuer.exchanges().size(), 4u);
  // A short life is kept for half of it; a token that lives no time is not kept at all.
  issuer.grant(20);
  EXPECT_EQ(*x.exchange(issuer.url, "t3", "b", kNow), "xchg-b-5");
  EXPECT_EQ(*x.exchange(issuer.url, "t3", "b", kNow + 9), "xchg-b-5");
  EXPECT_EQ(*x.exchange(issuer.url, "t3", "b", kNow + 10), "xchg-b-6");
  issuer.grant(0);
  EXPECT_EQ(*x.exchange(issuer.url, "t4", "b", kNow), "xchg-b-7");
  EXPECT_EQ(*x.exchange(issuer.url, "t4", "b", kNow), "xchg-b-8");
}

TEST(TokenExchange, AFailureIsNeverKeptAndSaysTheIssuersWordsInOneLine) {
  TempDir dir{"xchg"};
  FakeIssuer issuer;
  std::vector<IssuerConfig> issuers = {issuer.config(secret_file(dir))};
  TokenExchanger x(issuers, http_fetcher());
  issuer.refuse(400, R"({"error":"invalid_target","error_description":"audience b\nis unknown"})");
  auto token = x.exchange(issuer.url, "t1", "b", kNow);
  ASSERT_FALSE(token.ok());
  EXPECT_EQ(token.error().message(),
            "POST " + issuer.url + "/token: invalid_target: audience b is unknown (HTTP 400)");
  issuer.refuse(401, "not json");
  EXPECT_EQ(x.exchange(issuer.url, "t1", "b", kNow).error().message(),
            "POST " + issuer.url + "/token: the exchange was refused (HTTP 401)");
  issuer.refuse(200, R"({"token_type":"Bearer"})");
  EXPECT_EQ(x.exchange(issuer.url, "t1", "b", kNow).error().message(),
            "POST " + issuer.url + "/token: the answer has no access_token");
  issuer.grant();
  auto again = x.exchange(issuer.url, "t1", "b", kNow);
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_EQ(*again, "xchg-b-1");
  EXPECT_EQ(issuer.exchanges().size(), 4u);
}

TEST(TokenExchange, AnIssuerThatDoesNotAnswerIsAskedAgainAfterAWaitThatDoubles) {
  TempDir dir{"xchg"};
  FakeIssuer issuer;
  std::vector<IssuerConfig> issuers = {issuer.config(secret_file(dir))};
  TokenExchanger x(issuers, http_fetcher());
  issuer.refuse(503, R"({"error":"temporarily_unavailable"})");
  const std::string down = "POST " + issuer.url + "/token: temporarily_unavailable (HTTP 503)";
  EXPECT_EQ(x.exchange(issuer.url, "t1", "b", kNow).error().message(), down);
  // Any caller, any audience: the issuer is not asked for a second.
  EXPECT_EQ(x.exchange(issuer.url, "t2", "c", kNow).error().message(),
            "token endpoint down (asked again in 1 s): " + down);
  EXPECT_EQ(issuer.exchanges().size(), 1u);
  EXPECT_FALSE(x.exchange(issuer.url, "t1", "b", kNow + 1).ok());  // asked: down again
  EXPECT_EQ(issuer.exchanges().size(), 2u);
  EXPECT_EQ(x.exchange(issuer.url, "t1", "b", kNow + 2).error().message(),
            "token endpoint down (asked again in 1 s): " + down);  // a wait of 2 s this time
  EXPECT_EQ(issuer.exchanges().size(), 2u);
  issuer.grant();
  EXPECT_EQ(*x.exchange(issuer.url, "t1", "b", kNow + 3), "xchg-b-1");
  // Up again: a refusal of the caller's own is not the issuer being down.
  issuer.refuse(400, R"({"error":"invalid_grant"})");
  EXPECT_FALSE(x.exchange(issuer.url, "t3", "b", kNow + 3).ok());
  EXPECT_FALSE(x.exchange(issuer.url, "t3", "b", kNow + 3).ok());
  EXPECT_EQ(issuer.exchanges().size(), 5u);
  // No connection at all: the same, and the wait stops doubling at kMaxBackoffS.
  int port;
  {
    testing::FakeHttpServer gone(
        [](const testing::FakeRequest&) { return testing::FakeResponse{}; });
    port = gone.port();
  }
  issuer.set_endpoint("http://127.0.0.1:" + std::to_string(port) + "/token");
  TokenExchanger y(issuers, http_fetcher());
  int64_t t = kNow;
  for (int64_t wait = 1; wait <= 2 * TokenExchanger::kMaxBackoffS; wait *= 2) {
    auto asked = y.exchange(issuer.url, "t1", "b", t);
    ASSERT_FALSE(asked.ok());
    EXPECT_EQ(asked.error().code, ErrorCode::kNetwork);
    EXPECT_EQ(asked.error().message().find("token endpoint down"), std::string::npos)
        << "not asked at " << t - kNow << " s: " << asked.error().message();
    EXPECT_EQ(y.exchange(issuer.url, "t1", "b", t).error().context.size(), 1u);  // not asked
    t += std::min(wait, TokenExchanger::kMaxBackoffS);
  }
  EXPECT_NE(y.exchange(issuer.url, "t1", "b", t - 1).error().message().find("(asked again in 1 s)"),
            std::string::npos);
}

TEST(TokenExchange, NoExchangeWithoutAClientOrWithASecretAllMayRead) {
  TempDir dir{"xchg"};
  FakeIssuer issuer;
  std::string secret = secret_file(dir);
  std::vector<IssuerConfig> issuers = {issuer.config(secret)};
  issuers[0].exchange_client_id.clear();
  TokenExchanger none(issuers, http_fetcher());
  EXPECT_EQ(none.exchange(issuer.url, "t", "b", kNow).error().message(),
            "authenticate " + issuer.url +
                ": has no exchange_client_id in [[issuers]]: the broker exchanges no tokens of it");
  EXPECT_EQ(none.exchange("https://other", "t", "b", kNow).error().message(),
            "authenticate https://other: is not in [[issuers]]");
  issuers = {issuer.config(secret)};
  ::chmod(secret.c_str(), 0644);
  TokenExchanger open(issuers, http_fetcher());
  EXPECT_EQ(open.exchange(issuer.url, "t", "b", kNow).error().message(),
            "read " + secret + ": is readable by all: a client secret must not be (chmod o-r)");
  EXPECT_TRUE(issuer.exchanges().empty());  // nothing sent
}

TEST(TokenExchange, TheSecretGoesOnlyToAnHttpsTokenEndpoint) {
  TempDir dir{"xchg"};
  FakeIssuer issuer;
  issuer.set_endpoint("http://issuer.example.org/token");
  std::vector<IssuerConfig> issuers = {issuer.config(secret_file(dir))};
  TokenExchanger x(issuers, http_fetcher());
  EXPECT_EQ(x.exchange(issuer.url, "t", "b", kNow).error().message(),
            "discover issuer " + issuer.url +
                ": names token_endpoint \"http://issuer.example.org/token\", which is not "
                "https:// (plain http:// only on loopback)");
}

}  // namespace
}  // namespace berth::gateway
