// Extracting a squashfs file into a directory: a container's root filesystem made from a
// single-file image (`berth create --name N FILE.sqsh`, the Slurm plugin's named containers
// and --container-save of a squashfs image), as enroot's `create` unsquashes one.
//
// Read with libsquashfs (image/sqfs_api.h), never mounted, never through another program.
// The result is what a rootless `berth unpack` of the same layers would give:
// - every object is created below the target through directory fds of objects this extraction
//   made itself (O_NOFOLLOW, O_EXCL): no symlink of the image is ever followed, and an entry
//   name that is empty, ".", "..", or holds a '/' fails the whole extraction (a well-formed
//   image has none);
// - owners are the extracting user's (a rootless unpack cannot chown), set-id bits are
//   dropped, directories get u+rwx added (so that the owner can work inside them);
// - device nodes and sockets are skipped (devices are bound from the host at run time), as are
//   xattrs; FIFOs, symlinks (targets verbatim) and hard links (one inode) are kept;
// - mtimes as the image holds them (whole seconds); sparse files stay sparse.
// On failure the partly extracted target is removed.
#pragma once

#include <cstdint>
#include <string>

#include "core/error.h"

namespace berth {

struct UnsquashStats {
  uint64_t entries = 0;          ///< objects made (hard links count once per name)
  uint64_t bytes = 0;            ///< regular-file bytes written
  uint64_t skipped_devices = 0;  ///< device nodes and sockets left out
};

/// Extracts the squashfs file at `file` (or a SIF file's squashfs partition) into `target`,
/// which must not exist (its parent must). Sparse files stay sparse (holes where the image has
/// sparse blocks or blocks of zeros). It writes at most the free space statvfs() gives for the
/// target's parent (so that a small image holding a huge file fails at once rather than
/// filling the store), or `limit` bytes of file data when that is lower (0: no limit; the
/// user's extract_limit_mb): past it, a one-line error naming the file and the bound, and
/// nothing is left.
Result<UnsquashStats> unsquash(const std::string& file, const std::string& target,
                               uint64_t limit = 0);

}  // namespace berth
