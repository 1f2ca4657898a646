// An OpenID Connect issuer on loopback with an RFC 8693 token endpoint, for the tests of token
// exchange (gateway/token_exchange.h) and of a broker's sites of token = "exchange".
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/base64.h"
#include "fake_http_server.h"
#include "gateway/config.h"

namespace berth::gateway {

/// The fields of an application/x-www-form-urlencoded body, percent-decoded.
inline std::map<std::string, std::string> parse_form(const std::string& body) {
  std::map<std::string, std::string> out;
  auto decode = [](std::string_view s) {
    std::string r;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '%' && i + 2 < s.size()) {
        r.push_back(static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
        i += 2;
      } else {
        r.push_back(s[i] == '+' ? ' ' : s[i]);
      }
    }
    return r;
  };
  size_t at = 0;
  while (at <= body.size()) {
    size_t amp = body.find('&', at);
    if (amp == std::string::npos) amp = body.size();
    std::string_view pair = std::string_view(body).substr(at, amp - at);
    size_t eq = pair.find('=');
    if (eq != std::string_view::npos) out[decode(pair.substr(0, eq))] = decode(pair.substr(eq + 1));
    at = amp + 1;
  }
  return out;
}

/// A JWT of `claims` with a made-up signature: what the broker reads of a caller's token
/// (already verified by the gateway) is its claims.
inline std::string unsigned_jwt(const nlohmann::json& claims) {
  return base64url_encode(R"({"alg":"RS256","kid":"k"})") + "." + base64url_encode(claims.dump()) +
         "." + base64url_encode("sig");
}

/// The issuer: discovery at /.well-known/openid-configuration, the token endpoint at /token.
/// Each exchange it grants gives "xchg-AUDIENCE-N" (N counting its answers) living expires_in.
class FakeIssuer {
 public:
  FakeIssuer()
      : server_([this](const testing::FakeRequest& r) { return answer(r); }),
        url("http://" + server_.host()) {}

  /// From now on, the token endpoint answers `status` and `body` instead of a token.
  void refuse(int status, std::string body) {
    std::lock_guard lock(mu_);
    refusing_ = true;
    status_ = status;
    body_ = std::move(body);
  }
  void grant(int64_t expires_in = 300) {
    std::lock_guard lock(mu_);
    refusing_ = false;
    grants_left_ = -1;
    expires_in_ = expires_in;
  }
  /// Grants `n` more exchanges, then answers as refuse(`status`, `body`).
  void grant_only(int n, int status, std::string body) {
    std::lock_guard lock(mu_);
    refusing_ = false;
    grants_left_ = n;
    status_ = status;
    body_ = std::move(body);
  }
  /// The token_endpoint the discovery document names ("" for this server's /token).
  void set_endpoint(std::string url) {
    std::lock_guard lock(mu_);
    endpoint_ = std::move(url);
  }
  /// The requests to the token endpoint so far.
  std::vector<testing::FakeRequest> exchanges() {
    std::vector<testing::FakeRequest> out;
    for (const testing::FakeRequest& r : server_.requests())
      if (r.target == "/token") out.push_back(r);
    return out;
  }
  /// An [[issuers]] entry for it, with the broker's client and `secret_file`.
  IssuerConfig config(const std::string& secret_file) const {
    IssuerConfig i;
    i.issuer = url;
    i.audience = "a";
    i.exchange_client_id = "berth broker";
    i.exchange_client_secret_file = secret_file;
    return i;
  }

 private:
  testing::FakeResponse answer(const testing::FakeRequest& r) {
    std::lock_guard lock(mu_);
    if (r.target == "/.well-known/openid-configuration")
      return {200,
              {},
              nlohmann::json{{"issuer", url},
                             {"jwks_uri", url + "/jwks"},
                             {"token_endpoint", endpoint_.empty() ? url + "/token" : endpoint_}}
                  .dump()};
    if (r.target != "/token" || r.method != "POST") return {404, {}, "{}"};
    if (refusing_ || grants_left_ == 0)
      return {status_, {{"Content-Type", "application/json"}}, body_};
    if (grants_left_ > 0) --grants_left_;
    ++granted_;
    auto form = parse_form(r.body);
    nlohmann::json doc = {
        {"access_token", "xchg-" + form["audience"] + "-" + std::to_string(granted_)},
        {"issued_token_type", "urn:ietf:params:oauth:token-type:access_token"},
        {"token_type", "Bearer"},
        {"expires_in", expires_in_}};
    return {200, {{"Content-Type", "application/json"}}, doc.dump()};
  }

  std::mutex mu_;
  bool refusing_ = false;
  int grants_left_ = -1;  ///< -1: no end
  int status_ = 200;
  std::string body_;
  int64_t expires_in_ = 300;
  int granted_ = 0;
  std::string endpoint_;
  testing::FakeHttpServer server_;

 public:
  const std::string url;  ///< its issuer URL (http://127.0.0.1:PORT)
};

}  // namespace berth::gateway
