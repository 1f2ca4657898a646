// The squashfs superblock, checked before anything reads or mounts a file: the one check of
// "is this a squashfs image" that `berth run FILE.sqsh` (site/squashfs.h) and `berth inspect
// FILE.sqsh` (image/squash.h read_squash_info()) share, so that both say the same thing about
// the same file. Pure: the caller reads the bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"

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

}  // namespace berth
