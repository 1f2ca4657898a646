#include "site/config.h"

#include <nlohmann/json.hpp>

#include "core/env.h"
#include "core/fs.h"
#include "core/json.h"

#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>

#include <cerrno>

namespace berth {
namespace {

/// j[key] when it is a string; "" when it is absent or null; an error when it is anything else.
Result<std::string> string_value(const nlohmann::json& j, const char* key,
                                 const std::string& path) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::string();
  if (!it->is_string())
    return make_error("read config", path, std::string("\"") + key + "\" is not a string");
  return it->get<std::string>();
}

/// j[key] when it is a whole number >= 0; 0 when absent or null; an error when anything else.
Result<long> count_value(const nlohmann::json& j, const char* key, const std::string& path) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return 0L;
  if (!it->is_number_integer() || it->get<long long>() < 0 || it->get<long long>() > 1'000'000'000)
    return make_error("read config", path,
                      std::string("\"") + key + "\" is not a whole number of 0 to 1000000000");
  return static_cast<long>(it->get<long long>());
}

}  // namespace

std::string user_config_path() {
  return path_join(berth_config_dir(), "config.json");
}

std::string user_policy_path() {
  return path_join(berth_config_dir(), "berth.conf");
}

std::string site_policy_path() {
  return env_or("BERTH_SITE_CONF", kSitePolicyPath);
}

bool SiteConfig::is_locked(std::string_view key) const {
  return std::find(locked.begin(), locked.end(), key) != locked.end();
}

Result<SiteConfig> parse_site_config(std::string_view text, const std::string& path) {
  auto parsed = parse_json(text, path);
  if (!parsed) return make_error("read config", path, parsed.error().detail);
  const nlohmann::json& j = *parsed;
  if (!j.is_object()) return make_error("read config", path, "not a JSON object");
  SiteConfig c;
  c.path = path;
  if (auto it = j.find("insecure-registries"); it != j.end() && !it->is_null()) {
    if (!it->is_array())
      return make_error("read config", path, "\"insecure-registries\" is not a list of strings");
    for (const auto& r : *it) {
      if (!r.is_string())
        return make_error("read config", path, "\"insecure-registries\" is not a list of strings");
      c.insecure_registries.push_back(r.get<std::string>());
    }
  }
  c.driver_root = BERTH_TRY(string_value(j, "driver_root", path));
  c.dev_root = BERTH_TRY(string_value(j, "dev_root", path));
  c.pull_low_speed_limit = BERTH_TRY(count_value(j, "pull-low-speed-limit", path));
  c.pull_low_speed_time = BERTH_TRY(count_value(j, "pull-low-speed-time", path));
  c.pull_deadline = BERTH_TRY(count_value(j, "pull-deadline", path));
  return c;
}

Result<SiteConfig> read_site_config(const std::string& path) {
  if (!path_exists(path)) return SiteConfig{};
  std::string text = BERTH_TRY(read_file(path));
  return parse_site_config(text, path);
}

namespace {

/// The older config.json as a layer of the user's (its keys are a subset).
PolicyLayer json_layer(const SiteConfig& j) {
  PolicyLayer l;
  l.path = j.path;
  if (!j.insecure_registries.empty()) l.insecure_registries = j.insecure_registries;
  if (!j.driver_root.empty()) l.driver_root = j.driver_root;
  if (!j.dev_root.empty()) l.dev_root = j.dev_root;
  if (j.pull_low_speed_limit > 0) l.pull_low_speed_limit = j.pull_low_speed_limit;
  if (j.pull_low_speed_time > 0) l.pull_low_speed_time = j.pull_low_speed_time;
  if (j.pull_deadline > 0) l.pull_deadline = j.pull_deadline;
  return l;
}

/// Reads a policy file; nullopt when it is missing.
Result<std::optional<PolicyLayer>> read_policy(const std::string& path, bool site) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::optional<PolicyLayer>();
    return sys_error("read config", path);  // there, maybe, but hidden: not skipped
  }
  if (site) BERTH_CHECK(check_trusted_file(path));
  std::string text = BERTH_TRY(read_file(path));
  return std::optional<PolicyLayer>(BERTH_TRY(parse_policy(text, path, site)));
}

}  // namespace

Result<SiteConfig> load_config() {
  std::string site_path = site_policy_path();
  // A policy named on purpose must be there: a typo would leave it silently unenforced.
  if (::getenv("BERTH_SITE_CONF") != nullptr && !path_exists(site_path))
    return make_error("read config", site_path, "no such file (named by BERTH_SITE_CONF)",
                      ErrorCode::kNotFound);
  std::optional<PolicyLayer> site = BERTH_TRY(read_policy(site_path, true));

  // The user's layers: config.json, then berth.conf over it.
  SiteConfig json = BERTH_TRY(read_site_config(user_config_path()));
  std::optional<PolicyLayer> user = BERTH_TRY(read_policy(user_policy_path(), false));
  std::vector<PolicyLayer> user_layers;
  if (!json.path.empty()) user_layers.push_back(json_layer(json));
  if (user) user_layers.push_back(*user);
  SiteConfig c = merge_policy(site, user_layers);
  c.path = json.path;
  c.user_path = user ? user->path : "";
  return c;
}

}  // namespace berth
