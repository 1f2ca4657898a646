// Choosing the engine for a run (--engine, the container's recorded default, userns).
#pragma once

#include <optional>
#include <string>

#include "core/error.h"
#include "runtime/container_spec.h"
#include "runtime/containers.h"
#include "runtime/engines.h"
#include "site/config.h"

namespace berth::cli {

/// The engine a run of container `c` asks for: `requested` (--engine), else the container's
/// recorded one, else the site's default_engine (with `site`), else Berth's.
EngineChoice engine_for(const ContainerRecord& c, std::optional<EngineChoice> requested,
                        const SiteConfig* site);

/// Runs `spec` for container `c` with engine `requested` (--engine; nullopt for the
/// container's default, engine_for()): checks the engine is available, says once on stderr
/// what auto chose, and runs it with the rootfs's symlinks in the form it needs
/// (run_with_link_form()). With `site`, the engine chosen must be one it allows.
/// An error here means the workload never started.
Result<RunOutcome> run_with_engine(ContainerStore& cs, const ContainerRecord& c,
                                   const ContainerSpec& spec, std::optional<EngineChoice> requested,
                                   const SiteConfig* site = nullptr);

}  // namespace berth::cli
