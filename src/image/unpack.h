// Streaming layer unpacking into a root filesystem.
//
// A layer is a tar, plain or gzip/zstd compressed (detected from the bytes).
// Entries are applied in order with every path resolved against the root's
// directory fd: an entry whose name is absolute or contains "..", or whose
// parent would be reached through a symlink pointing outside the root, makes
// the whole layer fail with an error naming the entry. OCI whiteouts are
// honoured at any depth: ".wh.NAME" deletes NAME from lower layers,
// ".wh..wh..opq" empties its directory of lower-layer content. Hard links
// must point inside the root. Rootless: device nodes are skipped, ownership
// that cannot be set is ignored, and directories stay writable by the owner.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"

namespace berth {

struct UnpackOptions {
  bool keep_ownership = false;  ///< try lchown to the tar's uid/gid (root only)
};

struct UnpackStats {
  uint64_t entries = 0;
  uint64_t bytes = 0;        ///< regular-file bytes written
  uint64_t skipped_devices = 0;
};

/// Applies one layer file onto an existing root directory.
Result<UnpackStats> apply_layer(const std::string& root, const std::string& layer_path,
                                const UnpackOptions& opts = {});

/// Unpacks layers (bottom first) into `target`, which must not exist or be
/// empty. On failure the partly built target is removed.
Result<UnpackStats> unpack_layers(const std::vector<std::string>& layer_paths,
                                  const std::string& target, const UnpackOptions& opts = {});

}  // namespace berth
