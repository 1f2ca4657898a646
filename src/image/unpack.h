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
//
// A layer is unpacked only from bytes checked at that moment: the file's sha256 (its blob
// digest) and the sha256 of the uncompressed tar (the image config's diff_id) are computed
// while the entries are applied, over every byte of the file, and a mismatch fails the
// layer (and removes the partly built target) however the file came to differ from what
// was verified when it was stored.
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
  uint64_t bytes = 0;  ///< regular-file bytes written
  uint64_t skipped_devices = 0;
};

/// One layer file and what its bytes must hash to ("sha256:<hex>"; empty: not checked).
struct LayerInput {
  LayerInput(std::string p, std::string d = {}, std::string id = {})
      : path(std::move(p)), digest(std::move(d)), diff_id(std::move(id)) {}
  std::string path;
  std::string digest;   ///< of the file as stored (compressed): the blob digest
  std::string diff_id;  ///< of the uncompressed tar: the image config's rootfs.diff_ids entry
};

/// Applies one layer file onto an existing root directory.
Result<UnpackStats> apply_layer(const std::string& root, const LayerInput& layer,
                                const UnpackOptions& opts = {});

/// Unpacks layers (bottom first) into `target`, which must not exist or be
/// empty. On failure the partly built target is removed.
Result<UnpackStats> unpack_layers(const std::vector<LayerInput>& layers, const std::string& target,
                                  const UnpackOptions& opts = {});

}  // namespace berth
