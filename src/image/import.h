// `berth import`: a root filesystem tarball (as `docker export` writes it; plain, gzip or
// zstd) becomes a one-layer image with an OCI config (rootfs diff ID, history, created).
//
// The tarball is read into a staging area (image/staging.h) and unpacked there once with
// the ordinary unpacker, so that a truncated archive or an entry escaping the root is
// refused now, not at the first `run`; only then do its blobs and record become visible.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "image/platform.h"
#include "image/reference.h"
#include "image/store.h"

namespace berth {

struct ImportOptions {
  std::vector<std::string> changes;  ///< Dockerfile instructions: ENV, CMD, ENTRYPOINT, ...
  std::string message;               ///< the history entry's comment
  Platform platform;                 ///< the config's os/architecture
};

/// Applies one Dockerfile instruction (ENV, CMD, ENTRYPOINT, WORKDIR, USER, LABEL, EXPOSE,
/// VOLUME, STOPSIGNAL) to an image config's "config" object, as `docker import --change`.
Status apply_change(nlohmann::json& config, std::string_view change);

/// The image config of an imported root filesystem.
nlohmann::json import_config(const std::string& diff_id, const Platform& platform,
                             const std::string& created, const nlohmann::json& config,
                             const std::string& comment);

/// Reads a root filesystem tarball from `fd` (`what` names it in errors) and records it in
/// `store` as `name`.
Result<ImageRecord> import_rootfs(Store& store, int fd, const std::string& what,
                                  const Reference& name, const ImportOptions& opts);

}  // namespace berth
