#include "image/image_config.h"

#include "core/json.h"

namespace berth {
namespace {

using nlohmann::json;

/// j[key] when it is a string, "" when it is absent or null; `bad` when anything else.
bool optional_string(const json& j, const char* key, std::string& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return true;
  if (!it->is_string()) return false;
  out = it->get<std::string>();
  return true;
}

Result<std::vector<std::string>> string_list(const json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::vector<std::string>{};
  std::vector<std::string> out;
  if (!it->is_array()) return make_error("image config", key, "not a list of strings");
  for (const auto& v : *it) {
    if (!v.is_string()) return make_error("image config", key, "not a list of strings");
    out.push_back(v.get<std::string>());
  }
  return out;
}

}  // namespace

Result<ImageConfig> parse_image_config(std::string_view text, const std::string& what) {
  auto bad = [&what](const std::string& why) {
    return make_error("parse config", what, "malformed image config: " + why);
  };
  auto parsed = parse_json(text, "config " + what);
  if (!parsed) return bad(parsed.error().detail);
  const json& j = *parsed;
  if (!j.is_object()) return bad("not a JSON object");
  ImageConfig c;
  for (auto [key, field] :
       {std::pair{"os", &c.platform.os}, std::pair{"architecture", &c.platform.architecture},
        std::pair{"variant", &c.platform.variant}})
    if (!optional_string(j, key, *field)) return bad(std::string(key) + " is not a string");
  if (auto r = j.find("rootfs"); r != j.end() && r->is_object()) {
    if (auto d = r->find("diff_ids"); d != r->end() && d->is_array())
      for (const auto& id : *d)
        if (id.is_string()) c.diff_ids.push_back(id.get<std::string>());
  }
  if (auto cfg = j.find("config"); cfg != j.end() && !cfg->is_null()) {
    if (!cfg->is_object()) return bad("config is not a JSON object");
    c.config = *cfg;
  }
  return c;
}

Result<RunSettings> parse_run_settings(const json& config) {
  RunSettings s;
  s.entrypoint = BERTH_TRY(string_list(config, "Entrypoint"));
  s.cmd = BERTH_TRY(string_list(config, "Cmd"));
  s.env = BERTH_TRY(string_list(config, "Env"));
  s.user = string_field(config, "User");
  s.working_dir = string_field(config, "WorkingDir");
  return s;
}

}  // namespace berth
