// Image archives: `berth load` reads them (image/load.h) and `berth save` writes them
// (image/save.h); this header holds what both sides share.
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

#include <string>
#include <string_view>

namespace berth {

/// Annotation names on index.json entries.
inline constexpr const char* kRefNameAnnotation = "org.opencontainers.image.ref.name";
inline constexpr const char* kContainerdNameAnnotation = "io.containerd.image.name";

/// An archive's path for blob `digest`: "blobs/sha256/<hex>".
std::string archive_blob_name(std::string_view digest);

}  // namespace berth
