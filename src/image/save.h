// `berth save`: writes images as an OCI layout tar with a Docker manifest.json beside it
// (see image/image_archive.h).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "image/store.h"

namespace berth {

/// index.json for `images`: one entry per record, with both name annotations.
/// `manifest_sizes` holds the size of each record's manifest blob, in order.
nlohmann::json layout_index(const std::vector<ImageRecord>& images,
                            const std::vector<int64_t>& manifest_sizes);

/// Docker's manifest.json for `images` (blob paths under blobs/sha256/); `layers` holds
/// each record's layer digests. Records sharing a config share one entry.
nlohmann::json docker_manifest(const std::vector<ImageRecord>& images);

/// Writes `images` as an OCI layout tar to `fd`.
Status save_archive(const Store& store, const std::vector<ImageRecord>& images, int fd,
                    const std::string& what);

}  // namespace berth
