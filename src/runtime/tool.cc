// Finding an engine's host tool.
#include "runtime/tool.h"

#include <sys/stat.h>
#include <unistd.h>

#include "core/env.h"
#include "core/fs.h"

namespace berth {

Result<std::string> find_tool(const char* name, const char* env_var, const char* package) {
  auto executable = [](const std::string& p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  if (env_var != nullptr) {
    if (const char* v = ::getenv(env_var); v != nullptr && *v != '\0') {
      if (executable(v)) return std::string(v);
      return make_error("engine", std::string(env_var) + "=" + v, "not an executable file");
    }
  }
  // runc is in /usr/sbin, not always on a user's PATH.
  for (const std::string& dir : split_path(env_or("PATH", "") + ":/usr/sbin:/sbin")) {
    if (dir.empty() || dir.front() != '/') continue;
    std::string candidate = path_join(dir, name);
    if (executable(candidate)) return candidate;
  }
  Error e = make_error("engine", name, "not installed");
  if (package != nullptr && *package != '\0')
    return std::move(e).with_hint(std::string("install the Debian package '") + package + "'");
  return e;
}

std::vector<std::string> split_path(std::string_view list) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= list.size()) {
    size_t j = list.find(':', i);
    if (j == std::string_view::npos) j = list.size();
    out.emplace_back(list.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

}  // namespace berth
