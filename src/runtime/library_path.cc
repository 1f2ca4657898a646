// Berth's library folders first in LD_LIBRARY_PATH.
#include "runtime/library_path.h"

#include <algorithm>

#include "core/env_list.h"

namespace berth {

void put_library_dirs_first(std::vector<std::string>& env, const std::vector<std::string>& dirs) {
  if (dirs.empty()) return;
  std::string path;
  for (const std::string& d : dirs) path += (path.empty() ? "" : ":") + d;
  std::string old = env_lookup(env, "LD_LIBRARY_PATH").value_or("");
  if (!old.empty()) {
    for (const std::string& entry : split_path(old))
      if (std::find(dirs.begin(), dirs.end(), entry) == dirs.end()) path += ":" + entry;
  }
  set_env(env, "LD_LIBRARY_PATH=" + path);
}

std::vector<std::string> env_with_library_dirs(const ContainerSpec& spec) {
  std::vector<std::string> env = spec.env;
  put_library_dirs_first(env, spec.ld_library_dirs);
  return env;
}

}  // namespace berth
