// RFC 8693 token exchange at an issuer's token endpoint (gateway/token_exchange.h).
#include "gateway/token_exchange.h"

#include <httplib.h>
#include <sys/stat.h>

#include <algorithm>

#include "core/base64.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/strings.h"
#include "gateway/jwt.h"

namespace berth::gateway {
namespace {

constexpr time_t kTimeoutS = 5;
/// The largest token endpoint answer read (real ones are a few KiB).
constexpr size_t kMaxAnswerBytes = size_t{1} << 20;
/// The longest part of an issuer's own words put in a message.
constexpr size_t kMaxWordsBytes = 300;

constexpr const char* kGrantType = "urn:ietf:params:oauth:grant-type:token-exchange";
constexpr const char* kAccessTokenType = "urn:ietf:params:oauth:token-type:access_token";

/// `s` percent-encoded for an application/x-www-form-urlencoded body: all but RFC 3986's
/// unreserved characters.
std::string form_encode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) != 0 || c == '-' || c == '.' || c == '_' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

/// An issuer's words as one line of a message: control characters as spaces, cut short.
std::string one_line(std::string s) {
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  if (s.size() > kMaxWordsBytes) s = s.substr(0, kMaxWordsBytes) + "...";
  return s;
}

/// Whether `url` may be sent the broker's client secret: https://, or http:// on loopback
/// (as an issuer's own URL, config.h).
bool secure_endpoint(std::string_view url) {
  if (url.starts_with("https://")) return true;
  if (!url.starts_with("http://")) return false;
  url.remove_prefix(7);
  std::string_view host = url.substr(0, url.find_first_of(":/"));
  if (host.starts_with('[')) host = url.substr(1, url.find(']') - 1);
  return is_loopback_host(host);
}

/// How long the issued token of answer `doc` lives from now: its expires_in, else the exp of
/// the token itself where it is a JWT (read, not verified: only to know when to ask again);
/// 0 where neither says.
int64_t life_of(const nlohmann::json& doc, const std::string& token, int64_t now) {
  if (doc.contains("expires_in") && doc["expires_in"].is_number_integer())
    return std::max<int64_t>(0, doc["expires_in"].get<int64_t>());
  auto jws = parse_jws(token);
  int64_t exp = 0;
  if (jws.ok() && numeric_date(jws->payload, "exp", exp)) return std::max<int64_t>(0, exp - now);
  return 0;
}

}  // namespace

Result<std::string> read_exchange_secret(const IssuerConfig& issuer) {
  const std::string& path = issuer.exchange_client_secret_file;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return sys_error("stat", path);
  if ((st.st_mode & S_IROTH) != 0)
    return make_error("read", path, "is readable by all: a client secret must not be (chmod o-r)",
                      ErrorCode::kPermission);
  std::string text = BERTH_TRY(read_file(path));
  std::string secret(trim(text.substr(0, text.find('\n'))));
  if (secret.empty())
    return make_error("read", path, "holds no client secret", ErrorCode::kInvalidInput);
  return secret;
}

Result<std::string> TokenExchanger::endpoint(const IssuerConfig& issuer) {
  {
    std::lock_guard lock(mu_);
    if (auto it = endpoints_.find(issuer.issuer); it != endpoints_.end()) return it->second;
  }
  nlohmann::json meta = BERTH_TRY(fetch_discovery(fetch_, issuer.issuer));
  std::string url = string_field(meta, "token_endpoint");
  if (url.empty())
    return make_error("discover issuer", issuer.issuer, "has no token_endpoint",
                      ErrorCode::kInvalidInput);
  if (!secure_endpoint(url))
    return make_error("discover issuer", issuer.issuer,
                      "names token_endpoint \"" + one_line(url) +
                          "\", which is not https:// (plain http:// only on loopback)",
                      ErrorCode::kPermission);
  std::lock_guard lock(mu_);
  endpoints_[issuer.issuer] = url;
  return url;
}

Result<std::string> TokenExchanger::exchange(const std::string& issuer_name,
                                             const std::string& subject_token,
                                             const std::string& audience, int64_t now) {
  const auto key = std::make_pair(subject_token, audience);
  {
    std::lock_guard lock(mu_);
    if (auto it = kept_.find(key); it != kept_.end()) {
      if (now < it->second.until) return it->second.token;
      kept_.erase(it);
    }
  }
  const IssuerConfig* issuer = nullptr;
  for (const IssuerConfig& i : issuers_)
    if (i.issuer == issuer_name) issuer = &i;
  if (issuer == nullptr)
    return make_error("authenticate", issuer_name, "is not in [[issuers]]", ErrorCode::kPermission);
  if (issuer->exchange_client_id.empty())
    return make_error("authenticate", issuer_name,
                      "has no exchange_client_id in [[issuers]]: the broker exchanges no "
                      "tokens of it",
                      ErrorCode::kPermission);
  {
    std::lock_guard lock(mu_);
    if (auto it = down_.find(issuer_name); it != down_.end() && now < it->second.until) {
      Error e = it->second.error;
      return std::move(e).with_context("token endpoint down (asked again in " +
                                       std::to_string(it->second.until - now) + " s)");
    }
  }
  Result<std::string> token = ask(*issuer, subject_token, audience, now);
  std::lock_guard lock(mu_);
  if (token.ok()) {
    down_.erase(issuer_name);
  } else if (const Error& e = token.error();
             e.code == ErrorCode::kNetwork || e.http_status >= 500 || e.http_status == 429) {
    Down& d = down_[issuer_name];
    d.wait = std::clamp(d.wait * 2, kFirstBackoffS, kMaxBackoffS);
    d.until = now + d.wait;
    d.error = e;
  }
  return token;
}

Result<std::string> TokenExchanger::ask(const IssuerConfig& issuer,
                                        const std::string& subject_token,
                                        const std::string& audience, int64_t now) {
  const auto key = std::make_pair(subject_token, audience);
  std::string secret = BERTH_TRY(read_exchange_secret(issuer));
  std::string url = BERTH_TRY(endpoint(issuer));

  std::string form = std::string("grant_type=") + form_encode(kGrantType) +
                     "&subject_token=" + form_encode(subject_token) +
                     "&subject_token_type=" + form_encode(kAccessTokenType) +
                     "&audience=" + form_encode(audience) +
                     "&requested_token_type=" + form_encode(kAccessTokenType);
  // RFC 6749 section 2.3.1: the id and the secret form-encoded, then HTTP Basic.
  httplib::Headers headers{
      {"Authorization", "Basic " + base64_encode(form_encode(issuer.exchange_client_id) + ":" +
                                                 form_encode(secret))},
      {"Accept", "application/json"}};
  size_t path_at = url.find('/', url.find("://") + 3);
  httplib::Client client(url.substr(0, path_at));
  client.set_connection_timeout(kTimeoutS);
  client.set_read_timeout(kTimeoutS);
  client.set_write_timeout(kTimeoutS);
  client.set_follow_location(false);
  client.enable_server_certificate_verification(true);
  auto res = client.Post(path_at == std::string::npos ? "/" : url.substr(path_at), headers, form,
                         "application/x-www-form-urlencoded");
  if (!res) return make_error("POST", url, httplib::to_string(res.error()), ErrorCode::kNetwork);
  if (res->body.size() > kMaxAnswerBytes)
    return make_error("POST", url, "the answer is larger than 1 MiB", ErrorCode::kInvalidInput);
  nlohmann::json doc = parse_json_or_discarded(res->body, kMaxAnswerBytes);
  if (res->status != 200) {
    // RFC 6749 section 5.2: {"error", "error_description"}.
    std::string words = string_field(doc, "error");
    std::string why = string_field(doc, "error_description");
    if (!why.empty()) words += (words.empty() ? "" : ": ") + why;
    return http_error("POST", url, res->status,
                      words.empty() ? "the exchange was refused" : one_line(words));
  }
  std::string token = string_field(doc, "access_token");
  if (token.empty())
    return make_error("POST", url, "the answer has no access_token", ErrorCode::kInvalidInput);
  std::string type = lower(string_field(doc, "token_type"));
  if (!type.empty() && type != "bearer")
    return make_error("POST", url,
                      "the answer's token_type is \"" + one_line(type) + "\", not Bearer",
                      ErrorCode::kInvalidInput);
  if (std::string issued = string_field(doc, "issued_token_type");
      !issued.empty() && issued != kAccessTokenType)
    return make_error(
        "POST", url,
        "the answer's issued_token_type is \"" + one_line(issued) + "\", not an access token",
        ErrorCode::kInvalidInput);
  int64_t life = life_of(doc, token, now);
  int64_t until = now + life - std::min(kMarginS, life / 2);
  if (until > now) {
    std::lock_guard lock(mu_);
    if (kept_.size() >= kMaxEntries) {
      std::erase_if(kept_, [now](const auto& kv) { return now >= kv.second.until; });
      if (kept_.size() >= kMaxEntries) kept_.clear();
    }
    kept_[key] = Kept{token, until};
  }
  return token;
}

}  // namespace berth::gateway
