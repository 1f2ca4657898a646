// What a layer file on disk holds: its compression, read from its first bytes, and the
// digest of the tar inside (the "diff ID" an image config lists in rootfs.diff_ids).
#pragma once

#include <string>
#include <string_view>

#include "core/error.h"
#include "image/manifest.h"

namespace berth {

struct LayerFileInfo {
  Compression compression = Compression::kNone;
  std::string diff_id;  ///< "sha256:<hex>" of the uncompressed tar
};

/// Sniffs the compression from leading bytes: gzip, zstd, or none (taken for a plain tar).
/// bzip2 and xz are recognised only to be refused by name.
Result<Compression> sniff_compression(std::string_view head, const std::string& what);

/// Reads the layer at `path`; `digest` is the file's own digest when known (it is the diff
/// ID of an uncompressed layer, which then is not read again). Errors name `what` (the
/// path when empty).
Result<LayerFileInfo> inspect_layer_file(const std::string& path, const std::string& digest = "",
                                         const std::string& what = "");

/// The OCI layer media type for a compression.
std::string_view oci_layer_media_type(Compression c);

}  // namespace berth
