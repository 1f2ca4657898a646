// Squashfs image files as `berth run FILE.sqsh` takes them: the superblock checked before
// anything is mounted (image/squashfs_superblock.h, the one check `inspect` uses too), and the
// image metadata Berth writes into the files it makes.
//
// A Berth-made image holds /.berth/image.json:
//   {"schemaVersion": 1, "reference": "...", "digest": "sha256:...", "config": {OCI image config}}
// whose "config" is the whole image config blob (its "config" object gives Entrypoint, Cmd,
// Env, WorkingDir, User, as for a stored image). An image enroot made keeps its settings in
// /etc/environment and /etc/rc instead, and runs as under enroot (image/squash.h's
// enroot_image_config()). An image with neither (mksquashfs) has no image config: the command
// must then be given.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fs.h"
#include "image/sif.h"
#include "image/squashfs_superblock.h"

namespace berth {

/// An image file opened for mounting: the descriptor (the daemon mounts exactly this file,
/// whatever happens to the path afterwards) and its identity.
struct SquashfsFile {
  std::string path;  ///< as given, for messages
  UniqueFd fd;
  struct stat st = {};
  SquashfsExtent extent;  ///< where the image lies: the whole file, or a SIF file's partition
  SquashfsSuperblock superblock;
};

/// Opens `path` and checks its superblock (a SIF file's: its squashfs system partition's);
/// one-line errors for a missing file, a directory, a file that is not squashfs, a truncated
/// or corrupt one.
Result<SquashfsFile> open_squashfs(const std::string& path);

/// A name for one version of one image file (its device, inode, size, modification and change
/// times, in hex): the same file gets the same key on every start, a replaced or rewritten one
/// a new key.
std::string squashfs_key(const struct stat& st);

/// The image's run settings from /.berth/image.json beneath `root_fd` (a mounted image):
/// the image config's "config" object; without the file, enroot's settings
/// (enroot_image_config()); without those, Apptainer's /.singularity.d (sif_image_config());
/// else an empty object (`found` is then false). `image` names the image
/// file in errors.
Result<nlohmann::json> read_squashfs_image_config(int root_fd, const std::string& image,
                                                  bool* found);

}  // namespace berth
