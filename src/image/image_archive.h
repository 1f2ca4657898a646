// Image archives: `berth load` reads and `berth save` writes them.
//
// Two formats are read, plain or gzip/zstd compressed:
//   - an OCI image layout (oci-layout, index.json, blobs/sha256/<hex>), as `berth save`,
//     skopeo's oci-archive and Docker >= 25 write it; names come from the index entries'
//     io.containerd.image.name or org.opencontainers.image.ref.name annotations;
//   - a `docker save` archive (manifest.json with Config, RepoTags and Layers paths).
// Every blob is checked against its digest (the blob's name, the descriptor, or the
// config's rootfs.diff_ids), and the layers are unpacked once in the staging area so that
// an entry escaping the root is refused at load time. Nothing becomes visible in the store
// before the whole archive was read and checked (see image/staging.h).
//
// `save` writes the OCI layout, with a Docker manifest.json beside it so that `docker load`
// takes the archive too.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "core/error.h"
#include "image/store.h"

namespace berth {

/// Annotation names on index.json entries.
inline constexpr const char* kRefNameAnnotation = "org.opencontainers.image.ref.name";
inline constexpr const char* kContainerdNameAnnotation = "io.containerd.image.name";

/// Reads an image archive from `fd` (`what` names it in errors) into `store`; returns the
/// records added, one per name.
Result<std::vector<ImageRecord>> load_archive(Store& store, int fd, const std::string& what);

/// The reference an index.json entry names from its annotations, "" when none: the
/// containerd name, else a ref.name that is a whole reference ("repo:tag", "host/repo").
std::string name_from_annotations(const nlohmann::json& annotations);

/// The name of an image the archive leaves unnamed: "localhost/<short id>:<tag>", the tag
/// from a bare ref.name annotation, else "latest".
std::string unnamed_image_name(const std::string& config_digest, const std::string& tag);

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
