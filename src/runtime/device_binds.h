// The one translator from a spec's device edits (--gpus, --device, CDI) to the host binds a
// fallback engine expresses itself (proot -b, an OCI bind mount). The userns engine applies the
// same edits through its mount plan instead (plan_device_edits(), mount_apply.cc).
#pragma once

#include <string>
#include <vector>

#include "core/error.h"
#include "runtime/container_spec.h"
#include "runtime/engines.h"

namespace berth {

/// A bind a fallback engine expresses itself (proot -b, an OCI bind mount).
struct HostBind {
  std::string host;
  std::string container;
  bool read_only = false;
  bool operator==(const HostBind&) const = default;
};

/// The spec's device edits as host binds: a kTmpfs (and Berth's run directory when an edit lands
/// in it) becomes a folder under `scratch` (which the caller removes), a kSymlink or kFile
/// beneath one is written there, a kFile elsewhere is written beside them and bound read-only;
/// kBind stays a bind. A kSymlink outside a kTmpfs to a path an earlier edit bound becomes a
/// bind of that host path; any other cannot be made without changing the image: skipped when
/// optional, else an error naming the engine. Optional edits inside /proc are left out for an
/// engine that cannot mount there. Writes nothing unless `write` (tests plan without writing).
Result<std::vector<HostBind>> device_binds(const ContainerSpec& spec, const std::string& scratch,
                                           const Engine& engine, bool write);

}  // namespace berth
