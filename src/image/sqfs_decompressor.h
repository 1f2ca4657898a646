// The decompressor of a squashfs image, for the image reader (image/unsquash.h, image/squash.h)
// and for berth-squashfs (site/squashfs_fuse), which reach libsquashfs differently (loaded on
// first use, linked): they hand it libsquashfs's two functions.
//
// lzo is Berth's own (liblzo2's lzo1x_decompress_safe behind libsquashfs's sqfs_compressor_t):
// Debian's libsquashfs is built without it, and enroot's images are lzo by default
// (`mksquashfs -comp lzo`). Every other compressor is libsquashfs's; one it lacks, or an id no
// squashfs release has, is named in the error ("squashfs compressor lzma is not supported:
// ..."), never taken for a corrupt image.
#pragma once

#include <sqfs/compressor.h>
#include <sqfs/io.h>
#include <sqfs/super.h>

#include <string>

#include "core/error.h"

namespace berth {

/// libsquashfs's sqfs_compressor_config_init and sqfs_compressor_create.
struct SqfsCompressorFunctions {
  decltype(&::sqfs_compressor_config_init) config_init;
  decltype(&::sqfs_compressor_create) create;
};

/// The squashfs compressors Berth reads, in words: "gzip, lzma, lzo, xz, lz4 and zstd".
inline constexpr const char* kSquashfsReadableCompressors = "gzip, lzma, lzo, xz, lz4 and zstd";

/// The detail of the error for a compressor Berth cannot read: "squashfs compressor 9 (unknown)
/// is not supported: Berth reads gzip, lzma, lzo, xz, lz4 and zstd", `why` in place of the list
/// when given.
std::string squashfs_compressor_unsupported(uint16_t id, const std::string& why = "");

/// A decompressor for `super`'s compressor of the image `file` (the caller owns it:
/// sqfs_destroy): lzo Berth's own, its options (if the superblock says it has any) read from
/// `file`; the others libsquashfs's through `fns`. The error is `op` on `path`, naming the
/// compressor.
Result<sqfs_compressor_t*> make_squashfs_decompressor(const sqfs_super_t& super, sqfs_file_t* file,
                                                      const SqfsCompressorFunctions& fns, Op op,
                                                      const std::string& path);

/// A new lzo decompressor (SQFS_COMP_FLAG_UNCOMPRESS only: Berth writes no lzo), nullptr when
/// out of memory. Its read_options() reads squashfs-tools' lzo options (algorithm, level),
/// which no lzo1x stream needs to be decompressed: any variant is read by the same function.
sqfs_compressor_t* sqfs_lzo_decompressor_create(uint32_t block_size);

}  // namespace berth
