// Paths inside a container root filesystem, resolved against the root's fd.
//
// Tar entry names are normalised lexically (no "..", no absolute names), then
// directories are opened beneath the root with openat2(RESOLVE_BENEATH), so a
// symlink that leads out of the root makes the open fail instead of escaping.
// Kernels without openat2 get a manual component walk with the same rules.
// Removal works through fds and never follows a symlink.
#pragma once

#include <string>
#include <string_view>
#include <unordered_set>

namespace berth {

enum class EntryName {
  kPath,     ///< a normal relative path
  kRoot,     ///< the root itself ("./", ".", "", "/")
  kEscapes,  ///< absolute, or has a ".." component
};

/// Normalises a tar entry name into `out` ("./a//b/" -> "a/b") and classifies it.
EntryName normalize_entry_name(std::string_view raw, std::string& out);

/// Opens directory `path` (normalised, "" = root) beneath root_fd with O_PATH.
/// Returns the fd, or -1 with errno: EXDEV when a symlink on the way leaves
/// the root, ELOOP for too many symlinks, ENOENT/ENOTDIR as usual.
int open_beneath(int root_fd, const std::string& path);

/// The manual walk open_beneath falls back to without openat2 (exposed for tests).
int open_beneath_walk(int root_fd, const std::string& path);

/// Removes `name` in `dirfd` (file, symlink or whole tree) without following
/// symlinks. Returns 0 (also when missing) or an errno value.
int remove_at(int dirfd, const char* name);

/// Removes each child of directory `dirfd` whose path (`dir_path` + "/" +
/// name, `dir_path` "" = root) is not in `keep`; kept directories are
/// descended into with the same rule. Returns 0 or an errno value.
int clear_dir_except(int dirfd, const std::string& dir_path,
                     const std::unordered_set<std::string>& keep);

}  // namespace berth
