// The apptainer engine: the rootfs folder handed to Apptainer or SingularityCE when installed.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"
#include "runtime/container_spec.h"
#include "runtime/engines.h"

namespace berth {

/// Apptainer's command line for `spec` (`tool`: apptainer or singularity): exec --userns
/// --containall --writable on the rootfs folder, the environment by --env, volumes by --bind.
Result<std::vector<std::string>> apptainer_argv(const ContainerSpec& spec, const std::string& tool);

/// apptainer or singularity is on PATH (one line saying where to get it when not).
Status apptainer_probe(const Engine& engine);

/// Runs `run` under Apptainer (engine_table() points here).
RunOutcome run_apptainer(const EngineRun& run);

}  // namespace berth
