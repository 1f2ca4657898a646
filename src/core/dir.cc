#include "core/dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "core/fs.h"
#include "core/root_path.h"
#include "core/scope_guard.h"

namespace berth {
namespace {

/// The sorted names of the entries in `dirfd`; empty when it cannot be read.
std::vector<std::string> sorted_names(int dirfd) {
  std::vector<DirEntry> entries;
  std::vector<std::string> names;
  if (list_dir_at(dirfd, entries) != 0) return names;
  for (DirEntry& e : entries) names.push_back(std::move(e.name));
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

int list_dir_at(int dirfd, std::vector<DirEntry>& out) {
  // A fresh open of the folder: readdir needs a readable fd and closedir closes it.
  int fd = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno;
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    int err = errno;
    ::close(fd);
    return err;
  }
  auto closer = on_scope_exit([d] { ::closedir(d); });
  errno = 0;
  while (struct dirent* de = ::readdir(d)) {
    std::string_view n(de->d_name);
    if (n != "." && n != "..") out.push_back({std::string(n), de->d_type});
  }
  return errno;
}

std::vector<std::string> list_dir(const std::string& path) {
  UniqueFd dir(::open(path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!dir.valid()) return {};
  return sorted_names(dir.get());
}

std::vector<std::string> list_dir_in_root(const std::string& rootfs, const std::string& path) {
  UniqueFd root(::open(rootfs.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root.valid()) return {};
  UniqueFd dir(open_in_root(root.get(), path.c_str(), O_PATH | O_DIRECTORY));
  if (!dir.valid()) return {};
  return sorted_names(dir.get());
}

}  // namespace berth
