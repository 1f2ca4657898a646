#include "site/config.h"

#include <nlohmann/json.hpp>

#include "core/env.h"
#include "core/fs.h"
#include "core/json.h"

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
  if (!it->is_number_integer() || it->get<long long>() < 0 ||
      it->get<long long>() > 1'000'000'000)
    return make_error("read config", path,
                      std::string("\"") + key + "\" is not a whole number of 0 to 1000000000");
  return static_cast<long>(it->get<long long>());
}

}  // namespace

std::string user_config_path() { return path_join(berth_config_dir(), "config.json"); }

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

}  // namespace berth
