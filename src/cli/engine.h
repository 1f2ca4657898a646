// Choosing the engine for a run (--engine, the container's recorded default, userns).
#pragma once

#include <string>

#include "core/error.h"
#include "runtime/container_spec.h"
#include "runtime/containers.h"
#include "site/config.h"

namespace berth::cli {

/// The engine used when neither --engine nor `berth setup --engine` says otherwise.
inline constexpr const char* kDefaultEngine = "userns";

/// Runs `spec` for container `c` with engine `requested` (--engine; "" for the container's
/// default): checks the engine is available, says once on stderr what `auto` chose, and runs
/// it with the rootfs's symlinks in the form it needs (run_with_link_form()). With `site`, its
/// default_engine stands in for Berth's, and the engine chosen must be one it allows.
/// An error here means the workload never started.
Result<RunOutcome> run_with_engine(ContainerStore& cs, const ContainerRecord& c,
                                   const ContainerSpec& spec, const std::string& requested,
                                   const SiteConfig* site = nullptr);

}  // namespace berth::cli
