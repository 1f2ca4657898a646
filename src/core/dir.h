// Directory listings: names in a folder, by path or by fd, and inside a
// container root (resolved with open_in_root, see core/root_path.h).
#pragma once

#include <string>
#include <vector>

namespace berth {

/// One directory entry: its name and readdir's d_type (DT_DIR, DT_REG, ..., DT_UNKNOWN).
struct DirEntry {
  std::string name;
  unsigned char type = 0;
};

/// Appends the entries of directory `dirfd` (any fd of the folder, O_PATH too) to `out`,
/// "." and ".." left out, in readdir order; `dirfd` stays open. Returns 0 or an errno value.
int list_dir_at(int dirfd, std::vector<DirEntry>& out);
/// The names in folder `path` ("." and ".." left out), sorted; empty when it cannot be read
/// (a missing folder is normal for most callers).
std::vector<std::string> list_dir(const std::string& path);
/// The names in folder `path` of the container root `rootfs` (sorted; empty when it is
/// missing), resolved in the root so that no link leads out of it.
std::vector<std::string> list_dir_in_root(const std::string& rootfs, const std::string& path);

}  // namespace berth
