// The engines that execute a ContainerSpec, as one table, and the choice among them.
//
//   userns      user + mount namespaces, pivot_root (the default; userns_engine.cc)
//   proot       Debian's proot: ptrace path translation, no namespaces needed (proot_engine.h)
//   fakechroot  Debian's libfakechroot by LD_PRELOAD, glibc images only (fakechroot_engine.h)
//   oci         an OCI bundle run by runc (crun when runc is missing) (oci_engine.h)
//   apptainer   Apptainer / SingularityCE when installed (apptainer_engine.h)
//   auto        userns when the kernel allows it, else proot, else fakechroot
//
// Each engine has an availability probe (its tool on PATH, the kernel feature) whose error is
// one line naming the package to install, and a run function. What the fallback engines share
// lives beside this header: tool.h (finding their tool), fallback.h (checking the spec,
// resolving the command, preparing the rootfs), spawn.h (running a host process with signals
// forwarded), device_binds.h (device edits as host binds).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "runtime/container_spec.h"

namespace berth {

/// What one run gives an engine besides the spec.
struct EngineRun {
  const ContainerSpec* spec = nullptr;
  std::string work_dir;  ///< a per-container folder the engine may use (bundle, scratch); exists
  std::string run_name;  ///< unique among running containers (runc's container ID)
};

struct Engine {
  const char* name;
  const char* summary;
  /// Debian package that provides the engine's tool ("" for none).
  const char* package;
  /// Empty Status when the engine can run here; else one line saying what is missing.
  Status (*available)();
  RunOutcome (*run)(const EngineRun& run);
};

/// Every engine, "auto" excluded, in order of preference.
const std::vector<Engine>& engine_table();

/// The names `--engine` accepts: the table's and "auto".
std::string engine_names();

/// Checks a name given to --engine / setup --engine ("auto" included).
Status validate_engine_name(std::string_view name);

/// The engine `name` designates, available here. For "auto": userns when user namespaces
/// work, else the first available fallback that needs none (proot, fakechroot: Berth's OCI
/// bundles ask for a user namespace too); `said` receives the line to print once (empty when
/// no choice was made).
Result<const Engine*> choose_engine(std::string_view name, std::string* said);

/// The userns engine's run function (run_userns() for the table).
RunOutcome run_userns_engine(const EngineRun& run);

}  // namespace berth
