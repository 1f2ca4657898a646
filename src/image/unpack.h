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
// was verified when it was stored. The diff_id alone may come from the record a pull left on
// a blob of the user's own store (kDiffIdRecordAttr): those bytes, which the digest check
// proves are the ones the pull saw, were hashed decompressed then, so they are not again.
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

/// The extended attribute a pull sets on a layer blob of the user's own store before it
/// publishes it: the diff_id ("sha256:<hex>") the blob's bytes were found to decompress to
/// while they downloaded. It is a fact about those bytes, not about any image.
inline constexpr char kDiffIdRecordAttr[] = "user.berth.diff_id";

/// One layer file and what its bytes must hash to ("sha256:<hex>"; empty: not checked).
struct LayerInput {
  LayerInput(std::string p, std::string d = {}, std::string id = {})
      : path(std::move(p)), digest(std::move(d)), diff_id(std::move(id)) {}
  std::string path;
  std::string digest;   ///< of the file as stored (compressed): the blob digest
  std::string diff_id;  ///< of the uncompressed tar: the image config's rootfs.diff_ids entry
  /// The file is a blob of the user's own store (Store::layer_inputs()): a diff_id recorded on
  /// it (kDiffIdRecordAttr) stands for hashing the decompressed stream, once the file's own
  /// digest, hashed in the same read, matches `digest`. Without a record it is hashed.
  bool use_diff_id_record = false;
};

/// Applies one layer file onto an existing root directory.
Result<UnpackStats> apply_layer(const std::string& root, const LayerInput& layer,
                                const UnpackOptions& opts = {});

/// Unpacks layers (bottom first) into `target`, which must not exist or be
/// empty. On failure the partly built target is removed.
Result<UnpackStats> unpack_layers(const std::vector<LayerInput>& layers, const std::string& target,
                                  const UnpackOptions& opts = {});

}  // namespace berth
