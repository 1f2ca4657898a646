// Root emulation's apt drop-in (runtime/root_emulation.h), apart from the filter itself so that
// the Slurm plugin compiles the filter in without Berth's file helpers.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "core/fs.h"
#include "core/root_path.h"
#include "runtime/root_emulation.h"

namespace berth {

bool needs_apt_drop_in(int root_fd) {
  UniqueFd dir(open_in_root(root_fd, "/etc/apt/apt.conf.d", O_PATH | O_DIRECTORY));
  if (!dir.valid()) return false;
  UniqueFd file(open_in_root(root_fd, kAptDropIn, O_PATH));
  return !file.valid() && errno == ENOENT;
}

Status prepare_root_emulation(int root_fd) {
  UniqueFd dir(open_in_root(root_fd, "/etc/apt/apt.conf.d", O_PATH | O_DIRECTORY));
  if (!dir.valid()) return {};  // no apt here (or no such directory): nothing to do
  UniqueFd file(open_in_root(root_fd, kAptDropIn, O_WRONLY | O_CREAT | O_EXCL, 0644));
  if (!file.valid()) {
    if (errno == EEXIST) return {};  // written by an earlier run
    // A tree the user may not write (`berth run DIR` on a shared, read-only image) runs as it
    // is: nothing can be installed there anyway, and apt still takes -o APT::Sandbox::User=root.
    if (errno == EACCES || errno == EPERM || errno == EROFS) return {};
    return sys_error("create", kAptDropIn);
  }
  return write_all(file.get(), kAptDropInText, kAptDropIn);
}

void retire_root_emulation(int root_fd) {
  UniqueFd dir(open_in_root(root_fd, "/etc/apt/apt.conf.d", O_PATH | O_DIRECTORY));
  if (!dir.valid()) return;
  const char* name = std::strrchr(kAptDropIn, '/') + 1;
  UniqueFd file(::openat(dir.get(), name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!file.valid()) return;  // none (the usual case)
  char buf[512];
  ssize_t n = ::read(file.get(), buf, sizeof buf);
  if (n == static_cast<ssize_t>(kAptDropInText.size()) &&
      std::string_view(buf, static_cast<size_t>(n)) == kAptDropInText)
    (void)::unlinkat(dir.get(), name, 0);  // best effort: apt then merely runs as root
}

}  // namespace berth
