#include "image/auth.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>

#include "core/base64.h"
#include "core/env.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/strings.h"
#include "image/http.h"

namespace berth {

namespace {

constexpr std::string_view kDockerIndexKey = "https://index.docker.io/v1/";

bool is_space(char c) {
  return c == ' ' || c == '\t';
}

/// "https://myreg:5000/v2/" -> "myreg:5000".
std::string strip_scheme_and_path(std::string_view s) {
  if (auto p = s.find("://"); p != std::string_view::npos) s.remove_prefix(p + 3);
  if (auto slash = s.find('/'); slash != std::string_view::npos) s = s.substr(0, slash);
  return std::string(s);
}

Error config_error(const std::string& file, std::string detail) {
  return make_error("read credentials", file, std::move(detail));
}

/// Parses one "auths" entry; nullopt for entries that carry nothing usable
/// (such as the empty objects Docker writes when a credential helper is used).
Result<std::optional<Credentials>> parse_entry(const std::string& file, const std::string& key,
                                               const nlohmann::json& v) {
  if (!v.is_object()) return config_error(file, "entry \"" + key + "\" is not an object");
  Credentials c;
  auto str = [&](const char* name) -> std::string {
    auto it = v.find(name);
    return (it != v.end() && it->is_string()) ? it->get<std::string>() : std::string();
  };
  std::string auth = str("auth");
  if (!auth.empty()) {
    auto decoded = base64_decode(auth);
    if (!decoded) return config_error(file, "entry \"" + key + "\": \"auth\" is not base64");
    auto colon = decoded->find(':');
    if (colon == std::string::npos) {
      return config_error(file, "entry \"" + key + "\": \"auth\" is not user:password");
    }
    c.username = decoded->substr(0, colon);
    c.password = decoded->substr(colon + 1);
  }
  if (std::string u = str("username"); !u.empty()) c.username = u;
  if (std::string p = str("password"); !p.empty()) c.password = p;
  c.identity_token = str("identitytoken");
  if (c.username.empty() && c.password.empty() && c.identity_token.empty()) {
    return std::optional<Credentials>();
  }
  return std::optional<Credentials>(std::move(c));
}

/// A credentials file: "auths" (a registry's default login) and Berth's "users".
struct AuthFile {
  std::map<std::string, Credentials> auths;
  std::map<std::string, CredentialStore::Users> users;
};

/// Reads Berth's "users" map: {"HOST": {"USER": entry}}.
Status load_users(const std::string& file, const nlohmann::json& doc, AuthFile* out) {
  auto users = doc.find("users");
  if (users == doc.end()) return {};  // written before "users", or by Docker
  if (!users->is_object()) return config_error(file, "\"users\" is not an object");
  for (auto reg = users->begin(); reg != users->end(); ++reg) {
    if (!reg->is_object())
      return config_error(file, "\"users\" entry \"" + reg.key() + "\" is not an object");
    for (auto u = reg->begin(); u != reg->end(); ++u) {
      auto entry = BERTH_TRY(parse_entry(file, reg.key() + "\" \"" + u.key(), u.value()));
      if (!entry) continue;
      entry->username = u.key();
      out->users[credential_key(reg.key())][u.key()] = std::move(*entry);
    }
  }
  return {};
}

/// Reads an {"auths": {...}} file into a map keyed by credential_key();
/// a missing file gives an empty map.
Result<AuthFile> load_auth_file(const std::string& file) {
  AuthFile f;
  std::map<std::string, Credentials>& out = f.auths;
  if (file.empty() || !path_exists(file)) return f;
  std::string text = BERTH_TRY(read_file(file));
  auto parsed = parse_json(text, file);
  if (!parsed) return config_error(file, "malformed JSON: " + parsed.error().detail);
  const nlohmann::json& doc = *parsed;
  if (!doc.is_object()) return config_error(file, "not a JSON object");
  BERTH_CHECK(load_users(file, doc, &f));
  auto auths = doc.find("auths");
  if (auths == doc.end()) return f;
  if (!auths->is_object()) return config_error(file, "\"auths\" is not an object");
  // Keys already in normal form win over the same registry written as a URL.
  std::map<std::string, bool> exact;
  for (auto it = auths->begin(); it != auths->end(); ++it) {
    auto entry = BERTH_TRY(parse_entry(file, it.key(), it.value()));
    if (!entry) continue;
    std::string key = credential_key(it.key());
    bool is_exact = (key == it.key());
    if (out.count(key) && exact[key] && !is_exact) continue;
    out[key] = std::move(*entry);
    exact[key] = is_exact;
  }
  return f;
}

nlohmann::json entry_json(const Credentials& c) {
  nlohmann::json e = nlohmann::json::object();
  if (!c.username.empty() || !c.password.empty()) {
    e["auth"] = base64_encode(c.username + ":" + c.password);
  }
  if (!c.identity_token.empty()) e["identitytoken"] = c.identity_token;
  return e;
}

Status write_auth_file(const std::string& file, const AuthFile& f) {
  nlohmann::json doc = {{"auths", nlohmann::json::object()}};
  for (const auto& [key, c] : f.auths) doc["auths"][key] = entry_json(c);
  for (const auto& [key, users] : f.users) {
    if (users.empty()) continue;
    for (const auto& [name, c] : users) doc["users"][key][name] = entry_json(c);
  }
  auto slash = file.find_last_of('/');
  if (slash != std::string::npos && slash > 0) BERTH_CHECK(make_dirs(file.substr(0, slash), 0700));
  return write_file_atomic(file, to_text(doc, 2) + "\n", 0600);
}

}  // namespace

Result<AuthChallenge> parse_www_authenticate(std::string_view header) {
  auto fail = [&](std::string detail) {
    return make_error("parse WWW-Authenticate", "'" + std::string(header) + "'", std::move(detail));
  };
  AuthChallenge ch;
  size_t i = 0, n = header.size();
  while (i < n && is_space(header[i])) ++i;
  size_t start = i;
  while (i < n && !is_space(header[i]) && header[i] != ',') ++i;
  ch.scheme = std::string(header.substr(start, i - start));
  if (ch.scheme.empty()) return fail("no authentication scheme");
  for (;;) {
    while (i < n && (is_space(header[i]) || header[i] == ',')) ++i;
    if (i >= n) break;
    start = i;
    while (i < n && header[i] != '=' && !is_space(header[i]) && header[i] != ',') ++i;
    std::string key = lower(header.substr(start, i - start));
    while (i < n && is_space(header[i])) ++i;
    if (i >= n || header[i] != '=') return fail("parameter \"" + key + "\" has no value");
    ++i;
    while (i < n && is_space(header[i])) ++i;
    std::string value;
    if (i < n && header[i] == '"') {
      ++i;
      bool closed = false;
      while (i < n) {
        char c = header[i++];
        if (c == '\\' && i < n) {
          value += header[i++];
        } else if (c == '"') {
          closed = true;
          break;
        } else {
          value += c;
        }
      }
      if (!closed) return fail("unterminated quoted value for \"" + key + "\"");
    } else {
      start = i;
      while (i < n && header[i] != ',' && !is_space(header[i])) ++i;
      value = std::string(header.substr(start, i - start));
    }
    ch.params[key] = std::move(value);
  }
  return ch;
}

std::string credential_key(std::string_view registry) {
  std::string host = strip_scheme_and_path(registry);
  std::string l = lower(host);
  if (l == "docker.io" || l == "index.docker.io" || l == "registry-1.docker.io") {
    return std::string(kDockerIndexKey);
  }
  return host;
}

Result<CredentialStore> CredentialStore::load() {
  CredentialStore s;
  s.berth_file = path_join(berth_config_dir(), "auth.json");
  s.docker_file =
      path_join(env_or("DOCKER_CONFIG", path_join(home_dir(), ".docker")), "config.json");
  AuthFile berth = BERTH_TRY(load_auth_file(s.berth_file));
  s.berth_ = std::move(berth.auths);
  s.berth_users_ = std::move(berth.users);
  s.docker_ = BERTH_TRY(load_auth_file(s.docker_file)).auths;
  return s;
}

std::optional<Credentials> CredentialStore::find(std::string_view registry) const {
  return find_user(registry, user);
}

std::optional<Credentials> CredentialStore::find_user(std::string_view registry,
                                                      std::string_view name) const {
  std::string key = credential_key(registry);
  if (!name.empty()) {
    if (auto it = berth_users_.find(key); it != berth_users_.end()) {
      if (auto u = it->second.find(std::string(name)); u != it->second.end()) return u->second;
    }
  }
  // A file with one login per registry (Docker's, Berth's before "users"): its user's.
  for (const auto* auths : {&berth_, &docker_}) {
    auto it = auths->find(key);
    if (it != auths->end() && (name.empty() || it->second.username == name)) return it->second;
  }
  return std::nullopt;
}

Status CredentialStore::save(std::string_view registry, const Credentials& c) {
  // Re-read the file so that entries written by another process since
  // load() are kept.
  AuthFile current = BERTH_TRY(load_auth_file(berth_file));
  std::string key = credential_key(registry);
  // A file written before "users" held one login: it stays one of the registry's users.
  if (auto old = current.auths.find(key); old != current.auths.end() &&
                                          !old->second.username.empty() &&
                                          !current.users[key].count(old->second.username))
    current.users[key][old->second.username] = old->second;
  current.auths[key] = c;
  if (!c.username.empty()) current.users[key][c.username] = c;
  BERTH_CHECK(write_auth_file(berth_file, current));
  berth_ = std::move(current.auths);
  berth_users_ = std::move(current.users);
  return {};
}

Result<bool> CredentialStore::erase(std::string_view registry) {
  AuthFile current = BERTH_TRY(load_auth_file(berth_file));
  std::string key = credential_key(registry);
  bool had = current.auths.erase(key) + current.users.erase(key) > 0;
  if (had) BERTH_CHECK(write_auth_file(berth_file, current));
  berth_ = std::move(current.auths);
  berth_users_ = std::move(current.users);
  return had;
}

Result<bool> CredentialStore::erase_user(std::string_view registry, const std::string& name) {
  AuthFile current = BERTH_TRY(load_auth_file(berth_file));
  std::string key = credential_key(registry);
  bool had = false;
  if (auto it = current.users.find(key); it != current.users.end()) {
    had = it->second.erase(name) > 0;
    if (it->second.empty()) current.users.erase(it);
  }
  if (auto d = current.auths.find(key); d != current.auths.end() && d->second.username == name) {
    had = true;
    auto others = current.users.find(key);
    if (others == current.users.end()) {
      current.auths.erase(d);
    } else {
      d->second = others->second.begin()->second;  // another user's login is the default now
    }
  }
  if (had) BERTH_CHECK(write_auth_file(berth_file, current));
  berth_ = std::move(current.auths);
  berth_users_ = std::move(current.users);
  return had;
}

std::vector<std::string> CredentialStore::berth_registries() const {
  std::vector<std::string> keys;
  for (const auto& [key, creds] : berth_) keys.push_back(key);
  for (const auto& [key, users] : berth_users_)
    if (!berth_.count(key)) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  return keys;
}

}  // namespace berth
