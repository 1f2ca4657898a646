// Apptainer/Singularity SIF files: a squashfs image inside a container of their own. Berth runs,
// inspects and extracts the SIF file's primary system partition as it would a squashfs file,
// at its offset in the file, and runs it as Apptainer does (sif_image_config()).
//
// The layout (github.com/apptainer/sif, pkg/sif: sif.go, descriptor.go; Go's binary.Read,
// little-endian, packed): a 128-byte global header, the launch script "#!/usr/bin/env
// run-singularity\n" padded to 32 bytes, then "SIF_MAGIC\0" at 32, the version "01\0" at 42,
// the arch (3), a UUID (16), created and modified times, and six int64 from 80: descriptors
// free, descriptors total, the descriptor table's offset and size, the data's offset and size.
// Each descriptor is 585 bytes: data type (int32; 0x4004 a partition), used (1 byte), id,
// group id, linked id (uint32 each), the object's offset, size, size with padding, created,
// modified, uid, gid (int64 each), a name (128) and 384 bytes of type-specific data, which for
// a partition begin with its file system type (int32; 1 squashfs) and partition type (int32;
// 2 the primary system partition, the one `apptainer run` runs).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "image/squashfs_superblock.h"

namespace berth {

/// The size of a SIF file's global header, at offset 0.
inline constexpr size_t kSifHeaderSize = 128;
/// The size of one SIF descriptor.
inline constexpr size_t kSifDescriptorSize = 585;

/// Whether `head`, a file's first bytes, are a SIF file's ("SIF_MAGIC\0" at 32).
bool is_sif(std::string_view head);

/// A SIF file's descriptor table, as its header places it.
struct SifTable {
  uint64_t offset = 0;
  uint64_t count = 0;  ///< descriptors (the header's "total")
};

/// The descriptor table of the SIF file whose global header is `header` (kSifHeaderSize bytes)
/// and whose length is `file_size`: one-line errors ("SIF file ...") for a header that is
/// short, of another version, or places the table outside the file. `path` names it.
Result<SifTable> sif_descriptor_table(std::string_view header, uint64_t file_size,
                                      const std::string& path);

/// Where a squashfs image lies in a file: the whole file, or a SIF file's partition.
struct SquashfsExtent {
  uint64_t offset = 0;
  uint64_t size = 0;
  bool sif = false;
};

/// The primary system partition of a SIF file from its descriptor table (`descriptors`, count
/// descriptors as sif_descriptor_table() says); one-line errors: no such partition, one that is
/// not plain squashfs (ext3, encrypted), or one outside the file.
Result<SquashfsExtent> sif_system_partition(std::string_view descriptors, uint64_t count,
                                            uint64_t file_size, const std::string& path);

/// Where the squashfs image of the open file `fd` (`file_size` bytes) lies: a SIF file's
/// primary system partition, else the whole file.
Result<SquashfsExtent> locate_squashfs(int fd, uint64_t file_size, const std::string& path);

/// Reads and checks the superblock at `at` in `fd` (check_squashfs_superblock()); the errors
/// of a SIF file's partition say "SIF file's squashfs partition".
Result<SquashfsSuperblock> read_squashfs_superblock(int fd, const SquashfsExtent& at,
                                                    const std::string& path);

/// The script Berth runs a SIF image's command with: it sources /.singularity.d/env/*.sh in
/// order, as Apptainer's actions do, then execs its arguments.
inline constexpr const char* kSifEnvScript =
    "for f in /.singularity.d/env/*.sh; do if [ -f \"$f\" ]; then . \"$f\"; fi; done; "
    "exec \"$@\"";

/// The run settings of an image Apptainer/Singularity made (a SIF file's partition, or any
/// image with /.singularity.d), from what the image holds: whether /.singularity.d/runscript
/// exists, and the texts of 10-docker2singularity.sh (the Docker image's ENV) and
/// 90-environment.sh (the definition's %environment) in /.singularity.d/env. An image config
/// ("config" object): Entrypoint `/bin/sh -c kSifEnvScript sif` (every env script sourced by
/// the image's shell, as under Apptainer: they may compute values), Cmd the runscript, and Env
/// the two scripts' plain assignments (`export K=V`, `K=V`, quoted or not, no expansions), for
/// inspect and for an --entrypoint that bypasses the script. nullopt when the image has
/// neither a runscript nor those scripts.
std::optional<nlohmann::json> sif_image_config(bool has_runscript,
                                               const std::optional<std::string>& docker_env,
                                               const std::optional<std::string>& environment);

}  // namespace berth
