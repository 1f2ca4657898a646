#include "image/registry.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <map>
#include <mutex>

#include "core/base64.h"
#include "core/json.h"
#include "core/log.h"
#include "core/sha256.h"
#include "core/strings.h"
#include "image/http.h"
#include "image/manifest.h"

namespace berth {

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxManifestBytes = 4 << 20;
constexpr size_t kMaxSmallBody = 1 << 20;  // error bodies, token responses

bool iequals(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  });
}

/// The host part of "host[:port]" or "[v6]:port".
std::string host_only(std::string_view registry) {
  if (registry.starts_with("[")) {
    auto close = registry.find(']');
    return std::string(
        registry.substr(1, close == std::string_view::npos ? std::string_view::npos : close - 1));
  }
  // A bare IPv6 address ("::1") has several colons and no port.
  if (std::count(registry.begin(), registry.end(), ':') > 1) return std::string(registry);
  return std::string(registry.substr(0, registry.find(':')));
}

/// The registry's words from a {"errors":[{"code","message"}]} body, else a
/// short text body, else "".
std::string registry_error_detail(const std::string& body) {
  auto j = parse_json_or_discarded(body);
  std::string out;
  if (j.is_object() && j.contains("errors") && j["errors"].is_array()) {
    for (const auto& e : j["errors"]) {
      if (!e.is_object()) continue;
      std::string msg;
      if (e.contains("message") && e["message"].is_string()) msg = e["message"].get<std::string>();
      if (msg.empty() && e.contains("code") && e["code"].is_string())
        msg = e["code"].get<std::string>();
      if (msg.empty()) continue;
      if (!out.empty()) out += "; ";
      out += msg;
    }
    return out;
  }
  if (j.is_object()) {
    for (const char* k : {"message", "error_description", "error", "details"}) {
      if (j.contains(k) && j[k].is_string()) return j[k].get<std::string>();
    }
  }
  // A short one-line plain-text body ("Not Found") is worth showing.
  std::string t = body.substr(0, 200);
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
  bool printable = !t.empty() && std::all_of(t.begin(), t.end(),
                                             [](unsigned char c) { return c >= 0x20 && c < 0x7f; });
  return printable && t.front() != '<' ? t : std::string();
}

/// "scheme://host[:port]" of an absolute URL, lowercased; "" when `url` has no scheme.
std::string origin_of(std::string_view url) {
  auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return std::string();
  return lower(url.substr(0, url.find_first_of("/?#", scheme_end + 3)));
}

bool is_redirect(long status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

/// A Location header resolved against the URL that sent it: absolute http(s) URLs as they are,
/// "//host/path" on the same scheme, "/path" on the same origin, "path" beside the last segment.
Result<std::string> resolve_location(const std::string& from, std::string_view location) {
  std::string where(location);
  if (where.empty()) return make_error("GET", from, "redirect without a Location header");
  if (where.find("://") != std::string::npos) {
    std::string head = lower(std::string_view(where).substr(0, 8));
    if (!head.starts_with("http://") && !head.starts_with("https://")) {
      return make_error("GET", from, "redirect to a URL that is not http or https");
    }
    return where;
  }
  std::string origin = origin_of(from);
  if (where.starts_with("//")) return from.substr(0, from.find("://") + 1) + where;
  if (where.starts_with("/")) return from.substr(0, origin.size()) + where;
  std::string path = from.substr(0, from.find_first_of("?#", origin.size()));
  return path.substr(0, path.rfind('/') + 1) + where;
}

Error status_error(Op method, const std::string& url, const HttpResponse& r) {
  std::string detail = registry_error_detail(r.body);
  if (detail.empty()) detail = "unexpected response";
  return http_error(method, url, static_cast<int>(r.status), detail);
}

}  // namespace

bool registry_is_insecure(const std::string& registry, const RegistryOptions& opts) {
  std::string host = host_only(registry);
  if (host == "127.0.0.1" || host == "::1" || iequals(host, "localhost")) return true;
  for (const auto& r : opts.insecure) {
    if (iequals(r, registry) || iequals(r, host)) return true;
  }
  return false;
}

struct RegistryClient::Impl {
  std::string registry;
  std::string base;
  RegistryOptions opts;
  std::optional<Credentials> creds;

  struct Token {
    std::string value;
    Clock::time_point expires;
  };
  std::mutex mu;                        // guards everything below
  std::map<std::string, Token> tokens;  // by scope
  std::optional<AuthChallenge> bearer;  // the registry's Bearer challenge, once seen
  bool basic = false;                   // the registry asked for Basic

  HttpRequest request(const std::string& url) const {
    HttpRequest r;
    r.url = url;
    r.ca_file = opts.ca_file;
    r.connect_timeout_s = opts.connect_timeout_s;
    r.low_speed_limit = opts.low_speed_limit;
    r.low_speed_time_s = opts.low_speed_time_s;
    r.max_body = kMaxSmallBody;
    return r;
  }

  std::string basic_header() const {
    return "Authorization: Basic " + base64_encode(creds->username + ":" + creds->password);
  }

  Error login_hint_error(Error e) const {
    return std::move(e).with_hint("run 'berth login " + registry + "'");
  }
  Error bad_creds_error(Error e) const {
    return std::move(e).with_hint("check the credentials given to 'berth login " + registry + "'");
  }

  /// http_perform() within the client's deadline, if it has one.
  Result<HttpResponse> send(HttpRequest req) const {
    if (opts.deadline) {
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(*opts.deadline - Clock::now());
      if (left.count() <= 0)
        return make_error(req.method, req.url, "the deadline passed before the transfer ended");
      req.timeout_ms = static_cast<long>(left.count());
    }
    return http_perform(req);
  }

  Result<std::string> fetch_token(const AuthChallenge& ch, const std::string& scope);
  /// The Authorization header to send up front for `scope`, or "" when none is known yet.
  Result<std::string> auth_header(const std::string& scope);
  /// One request to the registry itself, authenticating as its 401 challenges ask.
  Result<HttpResponse> exchange(HttpRequest req, const std::string& scope);
  /// exchange(), following redirects when `follow` (see the definition).
  Result<HttpResponse> perform(HttpRequest req, const std::string& scope, bool follow = false);
};

Result<std::string> RegistryClient::Impl::fetch_token(const AuthChallenge& ch,
                                                      const std::string& scope) {
  auto realm_it = ch.params.find("realm");
  if (realm_it == ch.params.end() || realm_it->second.empty()) {
    return make_error("authenticate", registry, "Bearer challenge without a realm");
  }
  const std::string& realm = realm_it->second;
  std::string service;
  if (auto it = ch.params.find("service"); it != ch.params.end()) service = it->second;

  HttpRequest req = request(realm);
  bool with_creds = creds && (!creds->identity_token.empty() || !creds->password.empty());
  if (with_creds && realm.starts_with("http://")) {
    // Credentials travel in clear over plain HTTP: only to hosts the user
    // allowed to be insecure (loopback included).
    std::string rest = realm.substr(7);
    std::string realm_host = rest.substr(0, rest.find('/'));
    if (!registry_is_insecure(realm_host, opts)) {
      return make_error("authenticate", realm,
                        "token service uses plain HTTP; refusing to send credentials")
          .with_hint("add " + realm_host + " to the insecure registries if this is intended");
    }
  }
  if (with_creds && !creds->identity_token.empty()) {
    // OAuth2 refresh-token grant, as the distribution token spec describes.
    req.method = "POST";
    req.headers.push_back("Content-Type: application/x-www-form-urlencoded");
    req.post_body = "grant_type=refresh_token&client_id=berth&refresh_token=" +
                    url_escape(creds->identity_token) + "&service=" + url_escape(service);
    if (!scope.empty()) req.post_body += "&scope=" + url_escape(scope);
  } else {
    std::string q;
    if (!service.empty()) q += "service=" + url_escape(service);
    if (!scope.empty()) q += std::string(q.empty() ? "" : "&") + "scope=" + url_escape(scope);
    if (!q.empty()) req.url += (realm.find('?') == std::string::npos ? "?" : "&") + q;
    if (with_creds) req.headers.push_back(basic_header());
  }
  log::debug("fetching token from {} for scope '{}'", req.url, scope);
  HttpResponse r = BERTH_TRY(send(req));
  if (r.status == 401 || r.status == 403) {
    Error e = http_error(req.method, realm, static_cast<int>(r.status),
                         with_creds ? "registry " + registry + " rejected the credentials"
                                    : "authentication required by registry " + registry);
    return with_creds ? bad_creds_error(std::move(e)) : login_hint_error(std::move(e));
  }
  if (r.status < 200 || r.status >= 300) return status_error(req.method, realm, r);
  auto parsed = parse_json(r.body, "token response from " + realm);
  if (!parsed) return std::move(parsed).error();
  const nlohmann::json& j = *parsed;
  std::string token;
  if (j.is_object()) {
    for (const char* k : {"token", "access_token"}) {
      if (j.contains(k) && j[k].is_string() && !j[k].get<std::string>().empty()) {
        token = j[k].get<std::string>();
        break;
      }
    }
  }
  if (token.empty()) return make_error(req.method, realm, "token response carries no token");
  long expires_in = 60;
  if (j.contains("expires_in") && j["expires_in"].is_number_integer()) {
    // Clamped: an absurd lifetime must not overflow the clock arithmetic below.
    expires_in = std::clamp<long>(j["expires_in"].get<long>(), 1, 86400);
  }
  // Renew a little early so that a token does not expire in flight.
  auto margin = std::chrono::seconds(std::min<long>(10, expires_in / 10));
  std::lock_guard lock(mu);
  tokens[scope] = Token{token, Clock::now() + std::chrono::seconds(expires_in) - margin};
  return token;
}

Result<std::string> RegistryClient::Impl::auth_header(const std::string& scope) {
  std::optional<AuthChallenge> ch;
  {
    std::lock_guard lock(mu);
    if (auto it = tokens.find(scope); it != tokens.end() && Clock::now() < it->second.expires) {
      return "Authorization: Bearer " + it->second.value;
    }
    if (basic && creds) return basic_header();
    ch = bearer;
  }
  // The registry is known to want a token: get one for this scope before
  // asking, which saves every blob download a 401 round trip.
  if (ch) return "Authorization: Bearer " + BERTH_TRY(fetch_token(*ch, scope));
  return std::string();
}

Result<HttpResponse> RegistryClient::Impl::exchange(HttpRequest req, const std::string& scope) {
  const std::vector<std::string> base_headers = req.headers;
  std::string auth = BERTH_TRY(auth_header(scope));
  bool fresh = false;  // `auth` was just obtained in answer to a 401
  for (int attempt = 0;; ++attempt) {
    req.headers = base_headers;
    if (!auth.empty()) req.headers.push_back(auth);
    HttpResponse r = BERTH_TRY(send(req));
    if (r.status != 401) return r;

    std::string www = r.header("www-authenticate");
    bool have_creds = creds.has_value();
    auto denied = [&]() -> Error {
      std::string msg = registry_error_detail(r.body);
      if (!have_creds) {
        std::string detail = "authentication required";
        if (!msg.empty() && msg != detail) detail += " (" + msg + ")";
        return login_hint_error(http_error(req.method, req.url, 401, detail));
      }
      if (auth.starts_with("Authorization: Basic")) {
        return bad_creds_error(http_error(req.method, req.url, 401,
                                          "registry " + registry + " rejected the credentials"));
      }
      // A token obtained with the credentials was still refused: no access to
      // this repository (or it does not exist).
      return bad_creds_error(http_error(
          req.method, req.url, 401,
          "registry " + registry + " denied access" + (msg.empty() ? "" : " (" + msg + ")")));
    };
    if (www.empty() || attempt >= 2 || fresh) return denied();
    auto ch = parse_www_authenticate(www);
    if (!ch.ok())
      return std::move(ch).error().with_context(std::string(req.method.word()) + " " + req.url);
    if (iequals(ch->scheme, "Basic")) {
      if (!have_creds) return denied();
      {
        std::lock_guard lock(mu);
        basic = true;
      }
      auth = basic_header();
    } else if (iequals(ch->scheme, "Bearer")) {
      {
        std::lock_guard lock(mu);
        bearer = *ch;
        tokens.erase(scope);  // a cached token was refused: get a new one, once
      }
      auth = "Authorization: Bearer " + BERTH_TRY(fetch_token(*ch, scope));
    } else {
      return make_error(req.method, req.url,
                        "unsupported authentication scheme '" + ch->scheme + "'");
    }
    fresh = true;
  }
}

// Redirects are followed here rather than by libcurl so that the credential rule is Berth's own
// and does not depend on the libcurl release: a redirect within the registry's origin (scheme,
// host and port) authenticates as any registry request; one to another origin (S3-style
// storage, a CDN) is sent with no Authorization header, and a 401 from there is an error naming
// that host, never a reason to answer its challenge with the registry's credentials (the
// CVE-2020-15157 class; containerd and Go's HTTP client drop Authorization the same way).
Result<HttpResponse> RegistryClient::Impl::perform(HttpRequest req, const std::string& scope,
                                                   bool follow) {
  HttpResponse r = BERTH_TRY(exchange(req, scope));
  const std::string home = origin_of(base);
  for (int hops = 0; follow && is_redirect(r.status); ++hops) {
    if (hops == 10) return make_error(req.method, req.url, "too many redirects");
    req.url = BERTH_TRY(resolve_location(req.url, r.header("location")));
    if (origin_of(req.url) == home) {
      r = BERTH_TRY(exchange(req, scope));
      continue;
    }
    r = BERTH_TRY(send(req));  // req.headers never hold the Authorization header
    if (r.status == 401) {
      std::string away = origin_of(req.url).substr(origin_of(req.url).find("://") + 3);
      return http_error(req.method, req.url, 401,
                        "redirected to " + away +
                            ", which asks for credentials; the credentials for " + registry +
                            " are sent only to " + registry);
    }
  }
  return r;
}

RegistryClient::RegistryClient(std::string registry, RegistryOptions opts,
                               std::optional<Credentials> creds)
    : impl_(std::make_unique<Impl>()) {
  std::string host = (registry == "docker.io" || registry == "index.docker.io")
                         ? std::string("registry-1.docker.io")
                         : registry;
  impl_->base = (registry_is_insecure(registry, opts) ? "http://" : "https://") + host;
  impl_->registry = std::move(registry);
  impl_->opts = std::move(opts);
  impl_->creds = std::move(creds);
}

RegistryClient::~RegistryClient() = default;

std::string RegistryClient::base_url() const {
  return impl_->base;
}

Result<FetchedManifest> RegistryClient::get_manifest(const std::string& repo,
                                                     const std::string& ref) {
  std::string url = impl_->base + "/v2/" + repo + "/manifests/" + ref;
  HttpRequest req = impl_->request(url);
  req.headers.push_back("Accept: " + media::accept_header());
  req.max_body = kMaxManifestBytes;
  HttpResponse r = BERTH_TRY(impl_->perform(req, "repository:" + repo + ":pull"));
  if (r.status < 200 || r.status >= 300) return status_error("GET", url, r);

  FetchedManifest m;
  m.body = std::move(r.body);
  m.digest = sha256_digest(m.body);
  std::string sent = r.header("docker-content-digest");
  if (sent.starts_with("sha256:") && sent != m.digest) {
    return make_error(
        "GET", url,
        "manifest digest " + m.digest + " does not match Docker-Content-Digest " + sent);
  }
  if (ref.starts_with("sha256:") && ref != m.digest) {
    return make_error("GET", url, "manifest digest " + m.digest + " does not match " + ref);
  }
  m.media_type = detect_manifest_media_type(m.body, r.header("content-type"));
  return m;
}

Status RegistryClient::get_blob(const std::string& repo, const std::string& digest, uint64_t offset,
                                const ByteSink& sink, bool* restarted) {
  if (restarted) *restarted = false;
  std::string url = impl_->base + "/v2/" + repo + "/blobs/" + digest;
  HttpRequest req = impl_->request(url);
  if (offset > 0) req.headers.push_back("Range: bytes=" + std::to_string(offset) + "-");
  const std::string want_range = "bytes " + std::to_string(offset) + "-";
  bool first = true;
  req.sink = [&](const HttpResponse& head, const char* data, size_t len) -> Status {
    if (first) {
      first = false;
      if (offset > 0 && head.status == 200) {
        // The registry ignored the Range: the whole blob comes from byte 0.
        // Say so before the first byte reaches the sink so it can drop what it had.
        if (!restarted) return make_error("GET", url, "registry ignored the Range request");
        *restarted = true;
      }
      if (offset > 0 && head.status == 206 &&
          !head.header("content-range").starts_with(want_range)) {
        return make_error("GET", url,
                          "unexpected Content-Range '" + head.header("content-range") + "'",
                          ErrorCode::kNetwork);
      }
    }
    return sink(data, len);
  };
  HttpResponse r = BERTH_TRY(impl_->perform(req, "repository:" + repo + ":pull", true));
  if (r.status < 200 || r.status >= 300) return status_error("GET", url, r);
  if (offset > 0 && r.status == 200 && restarted) *restarted = true;  // empty body case
  return {};
}

Result<ApiResponse> RegistryClient::get_api(const std::string& path_and_query,
                                            const std::string& scope) {
  HttpRequest req = impl_->request(impl_->base + path_and_query);
  req.max_body = kMaxManifestBytes;
  HttpResponse r = BERTH_TRY(impl_->perform(req, scope));
  return ApiResponse{r.status, std::move(r.body), r.header("link")};
}

Status RegistryClient::check_login() {
  std::string url = impl_->base + "/v2/";
  HttpResponse r = BERTH_TRY(impl_->perform(impl_->request(url), ""));
  if (r.status != 200) return status_error("GET", url, r);
  return {};
}

}  // namespace berth
