#include "cli/context.h"

#include <cstdio>
#include <sstream>

#include "core/env.h"
#include "core/fs.h"

namespace berth::cli {

Result<Store> open_store(const GlobalOptions& g) {
  return Store::open(g.home.empty() ? berth_home() : g.home);
}

Result<RegistryOptions> registry_options(const GlobalOptions& g) {
  RegistryOptions opts;
  opts.insecure = g.insecure;
  std::stringstream env(env_or("BERTH_INSECURE_REGISTRIES", ""));
  for (std::string item; std::getline(env, item, ',');)
    if (!item.empty()) opts.insecure.push_back(item);
  std::string path = path_join(berth_config_dir(), "config.json");
  if (!path_exists(path)) return opts;
  std::string text = BERTH_TRY(read_file(path));
  try {
    auto j = nlohmann::json::parse(text);
    for (const auto& r : j.value("insecure-registries", nlohmann::json::array()))
      opts.insecure.push_back(r.get<std::string>());
  } catch (const nlohmann::json::exception& e) {
    return make_error("read config", path, e.what());
  }
  return opts;
}

void print_json(const nlohmann::json& j) { std::puts(j.dump(2).c_str()); }

}  // namespace berth::cli
