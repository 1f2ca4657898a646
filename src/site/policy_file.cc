// Policy files: the check that a site policy file is one only root can change. (Their keys are
// read, merged and shown by the table of site/policy_keys.cc.)
#include <fmt/core.h>

#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>

#include "site/config.h"

namespace berth {

Status check_trusted_file(const std::string& path, uid_t owner) {
  auto owned_right = [owner](const struct stat& st) {
    return st.st_uid == 0 || (owner != 0 && st.st_uid == owner);
  };
  std::string who = owner == 0 ? "root" : "root or uid " + std::to_string(owner);
  char real[PATH_MAX];
  if (::realpath(path.c_str(), real) == nullptr) return sys_error("read config", path);
  struct stat st;
  if (::stat(real, &st) != 0) return sys_error("read config", path);
  auto refuse = [&](const std::string& what) {
    return make_error("read config", path, "refused: " + what, ErrorCode::kPermission)
        .with_hint(
            "a policy file and every folder above it must be owned by root and not "
            "writable by group or others (chown root; chmod go-w)");
  };
  if (!S_ISREG(st.st_mode)) return refuse("not a regular file");
  if (!owned_right(st)) return refuse("owned by uid " + std::to_string(st.st_uid) + ", not " + who);
  if (st.st_mode & (S_IWGRP | S_IWOTH)) return refuse("writable by group or others");
  // Every folder above: whoever can write one could put another file in its place.
  std::string dir = real;
  while (dir != "/") {
    dir = dir.substr(0, dir.rfind('/'));
    if (dir.empty()) dir = "/";
    if (::stat(dir.c_str(), &st) != 0) return sys_error("read config", dir);
    if (!owned_right(st))
      return refuse(fmt::format("folder {} is owned by uid {}, not {}", dir, st.st_uid, who));
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
      return refuse("folder " + dir + " is writable by group or others");
  }
  return {};
}

}  // namespace berth
