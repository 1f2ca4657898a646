// Squashfs image files as `berth run FILE.sqsh` takes them: the superblock checked before
// anything is mounted, and the image metadata Berth writes into the files it makes.
//
// A Berth-made image holds /.berth/image.json:
//   {"schemaVersion": 1, "reference": "...", "digest": "sha256:...", "config": {OCI image config}}
// whose "config" is the whole image config blob (its "config" object gives Entrypoint, Cmd,
// Env, WorkingDir, User, as for a stored image). An image without the file (mksquashfs,
// enroot) has no image config: the command must then be given.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fs.h"

namespace berth {

/// The size of a squashfs 4.0 superblock, at offset 0 of the file.
inline constexpr size_t kSquashfsSuperblockSize = 96;

/// What Berth reads from a superblock.
struct SquashfsSuperblock {
  uint32_t inodes = 0;
  uint32_t block_size = 0;
  uint16_t compression = 0;  ///< 1 gzip, 2 lzma, 3 lzo, 4 xz, 5 lz4, 6 zstd
  uint64_t bytes_used = 0;   ///< the image's length; the file may be padded beyond it
};

/// Checks the first bytes of a file (`head`, up to kSquashfsSuperblockSize) of `file_size`
/// bytes: the magic (else "not a squashfs image"), version 4.0, a sane block size and
/// compressor, tables inside the image, and an image no longer than the file (else
/// "truncated"). `path` names the file in errors. Pure: no I/O.
Result<SquashfsSuperblock> check_squashfs_superblock(std::string_view head, uint64_t file_size,
                                                     const std::string& path);

/// The name of a compressor id ("lz4"), or "unknown".
std::string_view squashfs_compressor_name(uint16_t id);

/// An image file opened for mounting: the descriptor (the daemon mounts exactly this file,
/// whatever happens to the path afterwards) and its identity.
struct SquashfsFile {
  std::string path;  ///< as given, for messages
  UniqueFd fd;
  struct stat st = {};
  SquashfsSuperblock superblock;
};

/// Opens `path` and checks its superblock; one-line errors for a missing file, a directory,
/// a file that is not squashfs, a truncated or corrupt one.
Result<SquashfsFile> open_squashfs(const std::string& path);

/// A short name for one version of one image file (device, inode, size, change time): the
/// same file gets the same key on every start, a replaced or rewritten one a new key.
std::string squashfs_key(const struct stat& st);

/// The image's run settings from /.berth/image.json beneath `root_fd` (a mounted image):
/// the image config's "config" object, or an empty object when the file is absent (`found`
/// is then false). `image` names the image file in errors.
Result<nlohmann::json> read_squashfs_image_config(int root_fd, const std::string& image,
                                                  bool* found);

}  // namespace berth
