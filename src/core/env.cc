#include "core/env.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>

#include "core/fs.h"

namespace berth {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v && *v) ? std::string(v) : fallback;
}

std::string home_dir() {
  const char* h = std::getenv("HOME");
  if (h && *h) return h;
  if (struct passwd* pw = ::getpwuid(::getuid())) return pw->pw_dir;
  return "/";
}

std::string berth_home() {
  std::string xdg = env_or("XDG_DATA_HOME", path_join(home_dir(), ".local/share"));
  return env_or("BERTH_HOME", path_join(xdg, "berth"));
}

std::string berth_config_dir() {
  std::string xdg = env_or("XDG_CONFIG_HOME", path_join(home_dir(), ".config"));
  return env_or("BERTH_CONFIG_DIR", path_join(xdg, "berth"));
}

}  // namespace berth
