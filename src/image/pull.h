// Pulling an image: resolve the reference to a manifest (choosing a platform
// from an index), then fetch config and layers into the store, layers in
// parallel, each verified while it downloads and resumed when a .partial
// from an interrupted pull is there.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/progress.h"
#include "image/auth.h"
#include "image/platform.h"
#include "image/reference.h"
#include "image/registry.h"
#include "image/squash.h"
#include "image/store.h"

namespace berth {

/// A registry tried before the reference's own (a pull-through mirror, as Docker's
/// registry-mirrors): the same repository under `repository_prefix`.
struct PullMirror {
  std::string registry;           ///< host[:port]
  std::string repository_prefix;  ///< "" or "path/", put before the repository
};

struct PullOptions {
  std::optional<Platform> platform;  ///< requested; the host's when unset
  RegistryOptions registry;
  int jobs = 4;                       ///< layers downloaded at once
  int retries = 3;                    ///< attempts per blob on transfer failures (resuming)
  long deadline_s = 0;                ///< the whole pull's limit in seconds; 0 for none
  ProgressMeter* progress = nullptr;  ///< may be null
  /// Tried in order before the reference's registry; a mirror that fails in any way (lacks
  /// the image, is down, serves something that does not verify) hands over to the next, and
  /// the last to the reference's own registry. The image is recorded under its own name.
  std::vector<PullMirror> mirrors;
  /// Set: keep the image as one squashfs file made from its layers (ImageRecord::squash),
  /// whose layer blobs are then dropped unless another record uses them; unset: as layers.
  std::optional<SquashOptions> squash;
};

struct PullResult {
  ImageRecord record;
  bool up_to_date = false;  ///< the same manifest was already stored under this name
};

/// Pulls `ref` into `store` and records it under ref.str(). An image already stored under
/// that name with the same manifest, in the form asked for (layers or squashed), is up to
/// date; in the other form, it is converted (a squashfs file made from layers still present,
/// or layers fetched again).
///
/// With opts.squash, the layers are downloaded as usual (under pin()), merged into a squashfs
/// file in a staging folder (image/staging.h), published as a blob, and the record added; the
/// layer blobs are then released (Store::release_blobs()). A pull killed at any point leaves a
/// staging folder, downloads or blobs no record names: `berth gc`'s.
Result<PullResult> pull_image(Store& store, const Reference& ref, const CredentialStore& creds,
                              const PullOptions& opts);

}  // namespace berth
