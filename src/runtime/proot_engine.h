// The proot engine: Debian's proot translates every path by ptrace, so it needs no namespaces.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"
#include "runtime/container_spec.h"
#include "runtime/device_binds.h"
#include "runtime/engines.h"
#include "runtime/mount_plan.h"

namespace berth {

/// proot's argv for `spec`: `proot_path` first, then the plan's binds (file systems proot cannot
/// make are the host's: /dev, /proc; the image's own /tmp), `extra` (device_binds()), and the
/// workload, `command` being resolve_command()'s result.
std::vector<std::string> proot_argv(const ContainerSpec& spec, const std::string& proot_path,
                                    const MountPlan& plan, const std::string& command,
                                    const std::vector<HostBind>& extra);

/// Runs `run` under proot (engine_table() points here).
RunOutcome run_proot(const EngineRun& run);

}  // namespace berth
