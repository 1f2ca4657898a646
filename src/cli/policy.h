// The site policy applied to one run (site/config.h, site/policy.h): its defaults and locks
// on the run's options, its mount rules on the spec's volumes, its own mounts added.
#pragma once

#include <string>

#include "core/error.h"
#include "runtime/container_config.h"
#include "runtime/container_spec.h"
#include "site/config.h"

namespace berth::cli {

/// Which run options the command line gave (a default from the policy applies otherwise).
struct GivenOptions {
  bool bind_home = false;  ///< --bind-home or --no-bind-home
  bool read_only = false;  ///< --read-only[=true|false]
};

/// Fills in the policy's defaults (mount_home, readonly, gpus, [env]) where the command line
/// gave none, and refuses a command-line choice that differs from a value the site locks.
Status apply_run_policy(const SiteConfig& site, const GivenOptions& given, RunOptions& opts);

/// Checks the spec's volumes (-v, --bind-home) against deny_mount_destinations and
/// allow_mount_sources, then puts the policy's mounts first: the site's, unchecked, then
/// the user file's, checked like -v. `home_by_site`: the home volume is the site's
/// mount_home, not the user's asking, so its source is not checked.
Status apply_mount_policy(const SiteConfig& site, bool home_by_site, ContainerSpec& spec);

/// The engine a run uses when neither --engine nor the container says: the policy's
/// default_engine, else Berth's (runtime/engines.h default_engine()).
EngineChoice site_default_engine(const SiteConfig& site);

/// Refuses `engine` (the one asked for, or auto's choice) when the policy does not allow it,
/// or when the site locks default_engine to another.
Status check_run_engine(const SiteConfig& site, EngineChoice engine);

}  // namespace berth::cli
