// Token validation and identity mapping (gateway/auth.h).
#include "gateway/auth.h"

#include <glob.h>
#include <httplib.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>

#include "core/fs.h"
#include "core/json.h"
#include "core/strings.h"

namespace berth::gateway {
namespace {

constexpr time_t kFetchTimeoutS = 5;
/// The largest discovery document or JWKS read (real ones are a few KiB).
constexpr size_t kMaxDocBytes = size_t{1} << 20;

Error identity_error(std::string detail) {
  return make_error("map identity", "", std::move(detail), ErrorCode::kPermission);
}

void add_groups(const nlohmann::json& claims, const char* name, std::vector<std::string>& out) {
  auto it = claims.find(name);
  if (it == claims.end()) return;
  bool entitlements = std::string_view(name) == "eduperson_entitlement";
  auto add = [&](const nlohmann::json& g) {
    if (!g.is_string()) return;
    std::string s = g.get<std::string>();
    if (entitlements)
      if (auto group = aarc_group(s)) s = *group;
    if (!s.empty() && std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  };
  if (it->is_array())
    for (const auto& g : *it) add(g);
  else
    add(*it);
}

/// `s` with bytes outside printable ASCII written as \xHH, for a message.
std::string escaped(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

bool has_control(const std::string& s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  });
}

}  // namespace

std::optional<std::string> aarc_group(const std::string& urn) {
  // urn:NID:DELEGATED-NAMESPACE[:SUBNAMESPACE...]:group:GROUP[:SUBGROUP...][:role=ROLE]#AUTH
  if (!lower(std::string_view(urn).substr(0, 4)).starts_with("urn:")) return std::nullopt;
  std::string_view body = urn;
  body = body.substr(0, body.find('#'));
  std::vector<std::string_view> parts;
  for (size_t at = 0;;) {
    size_t colon = body.find(':', at);
    parts.push_back(body.substr(at, colon == std::string_view::npos ? colon : colon - at));
    if (colon == std::string_view::npos) break;
    at = colon + 1;
  }
  // The first "group" after urn:NID:DELEGATED (a namespace itself may not be called so).
  size_t g = 3;
  while (g < parts.size() && parts[g] != "group") ++g;
  if (g + 1 >= parts.size()) return std::nullopt;
  std::string path;
  for (size_t i = g + 1; i < parts.size(); ++i) {
    if (parts[i].starts_with("role=")) {
      if (i + 1 != parts.size()) return std::nullopt;  // the role is the last part
      break;
    }
    if (parts[i].empty()) return std::nullopt;
    path += "/" + std::string(parts[i]);
  }
  if (path.empty()) return std::nullopt;
  return path;
}

namespace {

/// Slurm's own bound on nested Include lines is its stack; ours is a depth, so that a file
/// that includes itself ends with an error instead of recursing for ever.
constexpr int kMaxIncludeDepth = 16;

/// Reads slurm.conf `path` (and what its Include lines name, in place) for SlurmUser and
/// ClusterName, the later lines winning as in Slurm. An Include's file name is taken relative
/// to the including file's folder unless absolute, "%c" stands for the ClusterName read so
/// far (Slurm's INCLUDE MODIFIERS), and shell wildcards name every file they match, in order.
Status read_slurm_conf(const std::string& path, int depth, std::string& user,
                       std::string& cluster) {
  if (depth > kMaxIncludeDepth)
    return make_error("read", path, "Include lines nest deeper than 16 files (a loop?)",
                      ErrorCode::kInvalidInput);
  std::string text = BERTH_TRY(read_file(path));
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(at, end - at);
    at = end + 1;
    line = trim(line.substr(0, line.find('#')));
    // "Include FILE": the keyword, whitespace, a file name (Slurm's keywords ignore case).
    if (line.size() > 8 && lower(line.substr(0, 7)) == "include" &&
        std::isspace(static_cast<unsigned char>(line[7])) != 0) {
      std::string name(trim(line.substr(8)));
      for (size_t c = name.find("%c"); c != std::string::npos; c = name.find("%c", c))
        name.replace(c, 2, cluster), c += cluster.size();
      if (!name.starts_with('/')) {
        size_t slash = path.rfind('/');
        std::string dir = slash == std::string::npos ? std::string(".") : path.substr(0, slash);
        name = dir.append("/").append(name);
      }
      glob_t found{};
      std::vector<std::string> files;
      if (::glob(name.c_str(), 0, nullptr, &found) == 0)
        for (size_t i = 0; i < found.gl_pathc; ++i) files.emplace_back(found.gl_pathv[i]);
      ::globfree(&found);
      // A wildcard may match nothing; a plain name that is missing is an error, as in Slurm.
      if (files.empty() && name.find_first_of("*?[") == std::string::npos) files.push_back(name);
      for (const std::string& f : files) BERTH_CHECK(read_slurm_conf(f, depth + 1, user, cluster));
      continue;
    }
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string key = lower(trim(line.substr(0, eq)));  // Slurm's keys ignore case
    if (key == "slurmuser") user = trim(line.substr(eq + 1));
    if (key == "clustername") cluster = trim(line.substr(eq + 1));
  }
  return {};
}

}  // namespace

Result<std::string> read_slurm_user(const std::string& path) {
  std::string user = "root";  // Slurm's default
  std::string cluster;
  BERTH_CHECK(read_slurm_conf(path, 0, user, cluster));
  return user;
}

Fetcher http_fetcher() {
  return [](const std::string& url) -> Result<std::string> {
    // scheme://host[:port] and the path, as cpp-httplib's client takes them.
    size_t scheme_end = url.find("://");
    size_t path_at = scheme_end == std::string::npos ? scheme_end : url.find('/', scheme_end + 3);
    if (scheme_end == std::string::npos)
      return make_error("GET", url, "not a URL", ErrorCode::kInvalidInput);
    std::string origin = url.substr(0, path_at);
    std::string path = path_at == std::string::npos ? "/" : url.substr(path_at);
    httplib::Client client(origin);
    client.set_connection_timeout(kFetchTimeoutS);
    client.set_read_timeout(kFetchTimeoutS);
    client.set_follow_location(false);
    client.enable_server_certificate_verification(true);
    auto res = client.Get(path);
    if (!res) return make_error("GET", url, httplib::to_string(res.error()), ErrorCode::kNetwork);
    if (res->status != 200) return http_error("GET", url, res->status, "not 200 OK");
    if (res->body.size() > kMaxDocBytes)
      return make_error("GET", url, "the answer is larger than 1 MiB", ErrorCode::kInvalidInput);
    return res->body;
  };
}

namespace {

std::string discovery_url(const std::string& issuer) {
  std::string base = issuer;
  while (!base.empty() && base.back() == '/') base.pop_back();
  return base + "/.well-known/openid-configuration";
}

}  // namespace

Result<nlohmann::json> fetch_discovery(const Fetcher& fetch, const std::string& issuer) {
  const std::string url = discovery_url(issuer);
  std::string text = BERTH_TRY(fetch(url));
  nlohmann::json meta = BERTH_TRY(parse_json(text, "OpenID configuration " + url, kMaxDocBytes));
  // OpenID Connect Discovery 1.0 section 4.3: the metadata's issuer must be the one asked.
  if (!meta.is_object() || string_field(meta, "issuer") != issuer)
    return make_error(
        "discover issuer", url,
        "names issuer \"" + string_field(meta, "issuer") + "\", not \"" + issuer + "\"",
        ErrorCode::kIntegrity);
  return meta;
}

Status KeyCache::refresh(const std::string& issuer, Entry& e, int64_t now) {
  e.fetched_at = now;
  ++e.fetches;
  generation_.fetch_add(1, std::memory_order_acq_rel);
  nlohmann::json meta = BERTH_TRY(fetch_discovery(fetch_, issuer));
  std::string jwks_uri = string_field(meta, "jwks_uri");
  if (jwks_uri.empty())
    return make_error("discover issuer", discovery_url(issuer), "has no jwks_uri",
                      ErrorCode::kInvalidInput);
  std::string jwks = BERTH_TRY(fetch_(jwks_uri));
  e.keys = BERTH_TRY(parse_jwks(jwks, jwks_uri));
  e.loaded = true;
  return {};
}

Result<Jwk> KeyCache::key(const std::string& issuer, const std::string& kid, int64_t now) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = entries_[issuer];
  auto find = [&]() -> const Jwk* {
    for (const Jwk& k : e.keys)
      if (k.kid == kid) return &k;
    return nullptr;
  };
  const Jwk* found = e.loaded ? find() : nullptr;
  // The first fetch at once; any later one (a failed first fetch included: an issuer that is
  // down is not asked again on every request) at most once per min_refresh_s.
  bool may_fetch = e.fetches == 0 || now - e.fetched_at >= min_refresh_s_ || now < e.fetched_at;
  if (found == nullptr && may_fetch) {
    Status s = refresh(issuer, e, now);
    if (!s.ok())
      return make_error(
          "verify token", "",
          "the keys of issuer \"" + issuer + "\" cannot be read: " + s.error().message(),
          ErrorCode::kNetwork);
    found = find();
  }
  if (found == nullptr)
    return make_error("verify token", "", "issuer \"" + issuer + "\" has no key \"" + kid + "\"",
                      ErrorCode::kPermission);
  return *found;
}

int KeyCache::fetches(const std::string& issuer) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(issuer);
  return it == entries_.end() ? 0 : it->second.fetches;
}

UserLookup system_user_lookup() {
  return [](const std::string& name) -> std::optional<std::pair<uid_t, gid_t>> {
    long size = ::sysconf(_SC_GETPW_R_SIZE_MAX);
    std::vector<char> buf(size > 0 ? static_cast<size_t>(size) : 16384);
    struct passwd pw {};
    struct passwd* out = nullptr;
    if (::getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &out) != 0 || out == nullptr)
      return std::nullopt;
    return std::make_pair(pw.pw_uid, pw.pw_gid);
  };
}

std::vector<std::string> token_groups(const nlohmann::json& claims) {
  std::vector<std::string> out;
  for (const char* name : {"groups", "wlcg.groups", "eduperson_entitlement"})
    add_groups(claims, name, out);
  return out;
}

Result<Account> map_identity(const nlohmann::json& claims, const IssuerConfig& issuer,
                             const GatewayConfig& config, const UserLookup& lookup,
                             const ServiceAccounts& services) {
  Account a;
  a.issuer = issuer.issuer;
  a.subject = string_field(claims, "sub");
  for (const UserMapping& u : config.users)
    if (u.issuer == a.issuer && u.subject == a.subject) a.user = u.user;
  if (a.user.empty() && !issuer.username_claim.empty()) {
    a.user = string_field(claims, issuer.username_claim.c_str());
    if (a.user.empty())
      return identity_error("subject \"" + a.subject + "\" of \"" + a.issuer +
                            "\" has no local account: not in [[users]] and the token has no \"" +
                            issuer.username_claim + "\" claim");
  }
  if (a.user.empty())
    return identity_error("subject \"" + a.subject + "\" of \"" + a.issuer +
                          "\" has no local account");
  std::string maps = "subject \"" + escaped(a.subject) + "\" of \"" + a.issuer + "\" maps to \"" +
                     escaped(a.user) + "\"";
  // A NUL would end the name getpwnam sees: "alice\0x" would run as alice.
  if (has_control(a.user))
    return identity_error(maps + ", which has control characters: not an account name");
  auto ids = lookup(a.user);
  if (!ids) return identity_error(maps + ", which is not a local account");
  uid_t uid = ids->first;
  if (uid == 0) return identity_error(maps + ", which is root: jobs never run as root");
  if (uid == services.own_uid && !config.accounts.allow_own_account)
    return identity_error(maps + ", which is berthd's own account: jobs never run as the gateway");
  if (a.user == services.slurm_user || (services.slurm_uid && uid == *services.slurm_uid))
    return identity_error(maps + ", which is Slurm's SlurmUser (\"" + services.slurm_user +
                          "\" in slurm.conf): jobs never run as Slurm's administrator");
  if (uid < config.accounts.uid_min || uid > config.accounts.uid_max)
    return identity_error(
        maps + ", whose uid " + std::to_string(uid) +
        " is outside [accounts] uid_min to uid_max (" + std::to_string(config.accounts.uid_min) +
        "-" + std::to_string(config.accounts.uid_max) + "): system accounts never run jobs");
  a.uid = ids->first;
  a.gid = ids->second;
  a.groups = token_groups(claims);
  for (const std::string& g : a.groups)
    if (std::find(config.admin_groups.begin(), config.admin_groups.end(), g) !=
        config.admin_groups.end())
      a.admin = true;
  return a;
}

std::shared_ptr<const nlohmann::json> VerifiedTokens::find(const std::string& token, int64_t now,
                                                           uint64_t generation) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(token);
  if (it == entries_.end()) return nullptr;
  const Entry& e = it->second;
  if (e.generation != generation || now < e.verified_at || now > e.until) return nullptr;
  return e.claims;
}

void VerifiedTokens::keep(const std::string& token, std::shared_ptr<const nlohmann::json> claims,
                          int64_t now, int64_t until, uint64_t generation) {
  std::lock_guard<std::mutex> lock(mu_);
  if (entries_.size() >= kMaxEntries) {
    std::erase_if(entries_, [&](const auto& kv) {
      return now > kv.second.until || kv.second.generation != generation;
    });
    if (entries_.size() >= kMaxEntries) entries_.clear();
  }
  entries_[token] = Entry{std::move(claims), now, until, generation};
}

Result<nlohmann::json> Authenticator::verify(const std::string& token, int64_t now) {
  std::shared_ptr<const nlohmann::json> claims = BERTH_TRY(verified(token, now));
  return *claims;
}

Result<std::shared_ptr<const nlohmann::json>> Authenticator::verified(const std::string& token,
                                                                      int64_t now) {
  // The generation is read before the keys: a fetch during the check makes the entry stale
  // at once rather than letting it outlive the keys it was checked with.
  uint64_t generation = keys_.generation();
  if (auto kept = verified_.find(token, now, generation)) return kept;
  Jws jws = BERTH_TRY(parse_jws(token));
  std::string iss = string_field(jws.payload, "iss");
  const IssuerConfig* issuer = config_.find_issuer(iss);
  if (issuer == nullptr)
    return make_error("verify token", "", "issuer \"" + iss + "\" is not trusted",
                      ErrorCode::kPermission);
  if (jws.kid.empty())
    return make_error("verify token", "", "the token names no key (kid)", ErrorCode::kPermission);
  Jwk key = BERTH_TRY(keys_.key(issuer->issuer, jws.kid, now));
  BERTH_CHECK(verify_signature(jws, key));
  BERTH_CHECK(check_claims(
      jws.payload, {issuer->issuer, issuer->audience, issuer->required_scope, config_.leeway_s},
      now));
  int64_t exp = 0;
  (void)numeric_date(jws.payload, "exp", exp);  // deliberate: check_claims() required it
  auto claims = std::make_shared<const nlohmann::json>(std::move(jws.payload));
  verified_.keep(token, claims, now, exp + config_.leeway_s, generation);
  return claims;
}

std::optional<std::string> bearer_token(const std::string& authorization) {
  // RFC 6750 section 2.1; the scheme name is case-insensitive.
  constexpr std::string_view kScheme = "bearer ";
  if (lower(std::string_view(authorization).substr(0, kScheme.size())) != kScheme)
    return std::nullopt;
  std::string token = authorization.substr(kScheme.size());
  while (!token.empty() && token.front() == ' ') token.erase(0, 1);
  return token;
}

std::variant<Account, AuthFailure> Authenticator::authenticate(const std::string& authorization,
                                                               int64_t now) {
  if (authorization.empty()) return AuthFailure{401, "no bearer token"};
  std::optional<std::string> token = bearer_token(authorization);
  if (!token) return AuthFailure{401, "the Authorization header is not a bearer token"};
  auto claims = verified(*token, now);
  if (!claims.ok()) return AuthFailure{401, claims.error().detail};
  const nlohmann::json& c = **claims;
  // The account is looked up again for every request, cached token or not: a user removed
  // from the system, or a changed [accounts] rule, takes effect at once.
  const IssuerConfig* issuer = config_.find_issuer(string_field(c, "iss"));
  auto account = map_identity(c, *issuer, config_, lookup_, services_);
  if (!account.ok())
    return AuthFailure{403, account.error().detail, issuer->issuer, string_field(c, "sub")};
  return std::move(*account);
}

}  // namespace berth::gateway
