#include "cli/policy.h"

#include "runtime/engines.h"
#include "runtime/root_emulation.h"
#include "site/policy.h"

namespace berth::cli {

Status apply_run_policy(const SiteConfig& site, const GivenOptions& given, RunOptions& opts) {
  if (given.bind_home && opts.bind_home != site.mount_home)
    BERTH_CHECK(
        check_not_locked(site, "mount_home", opts.bind_home ? "--bind-home" : "--no-bind-home"));
  if (!given.bind_home) opts.bind_home = site.mount_home;
  if (given.read_only && opts.read_only != site.readonly)
    BERTH_CHECK(
        check_not_locked(site, "readonly", opts.read_only ? "--read-only" : "--read-only=false"));
  if (!given.read_only) opts.read_only = site.readonly;
  if (opts.gpus && *opts.gpus != site.gpus)
    BERTH_CHECK(check_not_locked(site, "gpus", "--gpus " + *opts.gpus));
  if (!opts.gpus && !site.gpus.empty()) opts.gpus = site.gpus;
  if (opts.root_emulation && *opts.root_emulation != site.root_emulation)
    BERTH_CHECK(check_not_locked(
        site, "root_emulation",
        "--root-emulation " + std::string(root_emulation_name(*opts.root_emulation))));
  if (!opts.root_emulation) opts.root_emulation = site.root_emulation;
  if (opts.ib && *opts.ib != site.ib) BERTH_CHECK(check_not_locked(site, "ib", "--ib " + *opts.ib));
  opts.ib_site_default = site.ib;
  opts.policy_env = site.env;
  return {};
}

Status apply_mount_policy(const SiteConfig& site, bool home_by_site, ContainerSpec& spec) {
  for (const Volume& v : spec.volumes) {
    BERTH_CHECK(check_mount_destination(site, v.container));
    bool is_home = v.host == spec.home && v.container == spec.home;
    if (!(home_by_site && is_home)) BERTH_CHECK(check_mount_source(site, v.host));
  }
  std::vector<Volume> first;
  for (const std::string& m : site.site_mounts)
    first.push_back(BERTH_TRY(parse_volume(m).with_context("site_mounts of " + site.site_path)));
  for (const std::string& m : site.user_mounts) {
    Volume v = BERTH_TRY(parse_volume(m).with_context("site_mounts of " + site.user_path));
    BERTH_CHECK(check_mount_destination(site, v.container)
                    .with_context("site_mounts of " + site.user_path));
    BERTH_CHECK(check_mount_source(site, v.host).with_context("site_mounts of " + site.user_path));
    first.push_back(std::move(v));
  }
  spec.volumes.insert(spec.volumes.begin(), first.begin(), first.end());
  return {};
}

EngineChoice site_default_engine(const SiteConfig& site) {
  return site.default_engine.value_or(default_engine());
}

Status check_run_engine(const SiteConfig& site, EngineChoice engine) {
  if (site.is_locked("default_engine") && engine != site_default_engine(site))
    BERTH_CHECK(check_not_locked(site, "default_engine", "engine " + std::string(engine.spelled)));
  return check_engine_allowed(site, engine);
}

}  // namespace berth::cli
