#include "image/auth.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>

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

/// Reads an {"auths": {...}} file into a map keyed by credential_key();
/// a missing file gives an empty map.
Result<std::map<std::string, Credentials>> load_auths(const std::string& file) {
  std::map<std::string, Credentials> out;
  if (file.empty() || !path_exists(file)) return out;
  std::string text = BERTH_TRY(read_file(file));
  auto parsed = parse_json(text, file);
  if (!parsed) return config_error(file, "malformed JSON: " + parsed.error().detail);
  const nlohmann::json& doc = *parsed;
  if (!doc.is_object()) return config_error(file, "not a JSON object");
  auto auths = doc.find("auths");
  if (auths == doc.end()) return out;
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
  return out;
}

Status write_auths(const std::string& file, const std::map<std::string, Credentials>& auths) {
  nlohmann::json doc = {{"auths", nlohmann::json::object()}};
  for (const auto& [key, c] : auths) {
    nlohmann::json e = nlohmann::json::object();
    if (!c.username.empty() || !c.password.empty()) {
      e["auth"] = base64_encode(c.username + ":" + c.password);
    }
    if (!c.identity_token.empty()) e["identitytoken"] = c.identity_token;
    doc["auths"][key] = e;
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
  s.berth_ = BERTH_TRY(load_auths(s.berth_file));
  s.docker_ = BERTH_TRY(load_auths(s.docker_file));
  return s;
}

std::optional<Credentials> CredentialStore::find(std::string_view registry) const {
  std::string key = credential_key(registry);
  if (auto it = berth_.find(key); it != berth_.end()) return it->second;
  if (auto it = docker_.find(key); it != docker_.end()) return it->second;
  return std::nullopt;
}

Status CredentialStore::save(std::string_view registry, const Credentials& c) {
  // Re-read the file so that entries written by another process since
  // load() are kept.
  auto current = BERTH_TRY(load_auths(berth_file));
  current[credential_key(registry)] = c;
  BERTH_CHECK(write_auths(berth_file, current));
  berth_ = std::move(current);
  return {};
}

Result<bool> CredentialStore::erase(std::string_view registry) {
  auto current = BERTH_TRY(load_auths(berth_file));
  if (current.erase(credential_key(registry)) == 0) {
    berth_.erase(credential_key(registry));
    return false;
  }
  BERTH_CHECK(write_auths(berth_file, current));
  berth_ = std::move(current);
  return true;
}

std::vector<std::string> CredentialStore::berth_registries() const {
  std::vector<std::string> keys;
  for (const auto& [key, creds] : berth_) keys.push_back(key);
  return keys;
}

}  // namespace berth
