// The oci engine: an OCI runtime bundle run rootless by runc, or by crun when runc is missing.
#pragma once

#include <sys/types.h>

#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "runtime/container_spec.h"
#include "runtime/device_binds.h"
#include "runtime/engines.h"
#include "runtime/mount_plan.h"

namespace berth {

/// The OCI runtime config.json for `spec`, run rootless by host user `host_uid`/`host_gid`,
/// with the plan's mounts (runc creates the minimal /dev's device nodes itself) and `extra`.
/// Fails where runc cannot express the spec: a user other than root (runc needs container
/// UID 0 mapped, and a rootless user can map only its own ID).
Result<nlohmann::json> oci_config(const ContainerSpec& spec, uid_t host_uid, gid_t host_gid,
                                  const MountPlan& plan, const std::vector<HostBind>& extra);

/// Runs `run` as an OCI bundle (engine_table() points here).
RunOutcome run_oci(const EngineRun& run);

}  // namespace berth
