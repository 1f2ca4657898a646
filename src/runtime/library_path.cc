// Berth's library folders first in LD_LIBRARY_PATH.
#include "runtime/library_path.h"

#include <algorithm>

#include "runtime/tool.h"

namespace berth {

void put_library_dirs_first(std::vector<std::string>& env, const std::vector<std::string>& dirs) {
  if (dirs.empty()) return;
  constexpr std::string_view kVar = "LD_LIBRARY_PATH=";
  auto it = std::find_if(env.begin(), env.end(),
                         [&](const std::string& e) { return e.starts_with(kVar); });
  std::string path;
  for (const std::string& d : dirs) path += (path.empty() ? "" : ":") + d;
  if (it != env.end()) {
    std::string_view old = std::string_view(*it).substr(kVar.size());
    if (!old.empty()) {
      for (const std::string& entry : split_path(old))
        if (std::find(dirs.begin(), dirs.end(), entry) == dirs.end()) path += ":" + entry;
    }
    *it = std::string(kVar) + path;
    return;
  }
  env.push_back(std::string(kVar) + path);
}

std::vector<std::string> env_with_library_dirs(const ContainerSpec& spec) {
  std::vector<std::string> env = spec.env;
  put_library_dirs_first(env, spec.ld_library_dirs);
  return env;
}

}  // namespace berth
