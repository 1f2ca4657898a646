// Paths inside the container root, resolved against the root's fd with
// openat2(RESOLVE_IN_ROOT): ".." and absolute symlinks stay inside the root,
// as they would after pivot_root, so an image symlink such as
// /etc/resolv.conf -> /run/... resolves to the root's own /run.
//
// These functions allocate nothing and keep no state, so the child between
// clone and exec can call them. They return an fd or 0 on success and -1
// with errno set on failure, like system calls.
#pragma once

#include <sys/types.h>

#include <string>

#include "core/error.h"

namespace berth {

/// openat2(root_fd, path, flags, mode) with RESOLVE_IN_ROOT and no magic
/// links; `path` may be absolute (taken relative to the root). O_CLOEXEC is added.
int open_in_root(int root_fd, const char* path, int flags, mode_t mode = 0);

/// Creates the missing directories of absolute `path` inside the root (like
/// mkdir -p) and, when `last_is_file`, the last component as an empty file.
/// Existing components are left as they are. Returns 0 or -1 with errno.
int make_path_in_root(int root_fd, const char* path, bool last_is_file, mode_t dir_mode = 0755);

/// Reads a small file inside the root ("" when it does not exist); for the parent side only
/// (it allocates). Not a regular file (a FIFO, a device) or larger than 16 MiB is an error.
Result<std::string> read_file_in_root(int root_fd, const char* path);

}  // namespace berth
