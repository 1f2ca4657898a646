#include "core/runtime_dir.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

#include "core/env.h"
#include "core/fs.h"
#include "core/log.h"

namespace berth {

namespace {

std::string uid_text() {
  return std::to_string(::getuid());
}

/// Who owns `path`, for the warning: "user NAME (uid N)", or "uid N".
std::string owner_of(const struct stat& st) {
  struct passwd* pw = ::getpwuid(st.st_uid);
  if (pw == nullptr) return "uid " + std::to_string(st.st_uid);
  return fmt::format("user {} (uid {})", pw->pw_name, st.st_uid);
}

/// The private folder: under the user's cache, one per host (a home may be shared by nodes).
std::string private_dir() {
  std::string cache = env_or("XDG_CACHE_HOME", "");
  if (cache.empty() || cache.front() != '/') {
    std::string home = env_or("HOME", "");
    if (home.empty() || home.front() != '/') return "";
    cache = path_join(home, ".cache");
  }
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0')
    std::snprintf(host, sizeof host, "%s", "localhost");
  return path_join(cache, "berth/run-" + std::string(host));
}

struct Choice {
  std::string path;
  bool in_cache = false;  ///< the private folder under the user's cache
};

Choice choose(const std::string& site_runtime_dir) {
  std::string dir = env_or("BERTH_RUNTIME_DIR", "");
  if (!dir.empty()) return {dir};
  if (!site_runtime_dir.empty()) {
    dir = path_join(site_runtime_dir, "berth-" + uid_text());
  } else {
    std::string xdg = env_or("XDG_RUNTIME_DIR", "");
    dir = !xdg.empty() && xdg.front() == '/' && path_exists(xdg) ? path_join(xdg, "berth")
                                                                 : "/tmp/berth-" + uid_text();
  }
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0 || (S_ISDIR(st.st_mode) && st.st_uid == ::getuid()))
    return {dir};
  std::string fallback = private_dir();
  if (fallback.empty()) return {dir};  // nowhere else: make_runtime_dir() says whose it is
  std::string what = !S_ISDIR(st.st_mode) && st.st_uid == ::getuid()
                         ? "a file or a symlink, not a folder"
                         : fmt::format("a {} of {}, not yours",
                                       S_ISDIR(st.st_mode) ? "folder" : "file", owner_of(st));
  log::warn_once("runtime dir taken",
                 fmt::format("{} is {}: using {} instead (set BERTH_RUNTIME_DIR or "
                             "XDG_RUNTIME_DIR to choose another)",
                             dir, what, fallback));
  return {fallback, true};
}

}  // namespace

std::string runtime_dir_path(const std::string& site_runtime_dir) {
  return choose(site_runtime_dir).path;
}

Result<std::string> make_runtime_dir(Op op, const std::string& site_runtime_dir) {
  Choice c = choose(site_runtime_dir);
  if (c.in_cache) BERTH_CHECK(make_dirs(c.path.substr(0, c.path.rfind('/')), 0700));
  Status made = make_own_dir(c.path, op, "runtime folder");
  if (!made.ok())
    return Error(made.error())
        .with_hint(
            "set BERTH_RUNTIME_DIR to a folder of your own (or XDG_RUNTIME_DIR, or HOME for "
            "the private fallback under ~/.cache/berth)");
  return c.path;
}

}  // namespace berth
