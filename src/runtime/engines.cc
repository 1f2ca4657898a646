// The engine table and `auto`'s choice among its rows.
#include "runtime/engines.h"

#include "runtime/apptainer_engine.h"
#include "runtime/fakechroot_engine.h"
#include "runtime/oci_engine.h"
#include "runtime/proot_engine.h"

namespace berth {
namespace {

Status userns_available() { return probe_user_namespaces(); }

}  // namespace

RunOutcome run_userns_engine(const EngineRun& run) { return run_userns(*run.spec); }

const std::vector<Engine>& engine_table() {
  // Fallbacks in order of preference: runc isolates like userns does (but needs user namespaces
  // as well, so `auto` passes it over), proot emulates everything but is slow on system calls,
  // fakechroot needs a glibc image.
  static const std::vector<Engine> table = {
      {"userns", "user + mount namespaces (the default)", "", userns_available, run_userns_engine},
      {"oci", "an OCI bundle run by runc (or crun)", "runc", oci_probe, run_oci},
      {"proot", "PRoot: ptrace path translation, no namespaces", "proot", proot_probe, run_proot},
      {"fakechroot", "libfakechroot by LD_PRELOAD (glibc images)", "fakechroot",
       fakechroot_probe, run_fakechroot},
      {"apptainer", "Apptainer or SingularityCE, when installed", "", apptainer_probe, run_apptainer},
  };
  return table;
}

std::string engine_names() {
  std::string out;
  for (const Engine& e : engine_table()) out += std::string(e.name) + ", ";
  return out + "auto";
}

Status validate_engine_name(std::string_view name) {
  if (name == "auto") return {};
  for (const Engine& e : engine_table())
    if (name == e.name) return {};
  if (name == "singularity") return {};
  return make_error("engine", std::string(name), "unknown engine")
      .with_hint("one of: " + engine_names());
}

Result<const Engine*> choose_engine(std::string_view name, std::string* said) {
  BERTH_CHECK(validate_engine_name(name));
  if (name == "singularity") name = "apptainer";
  if (name != "auto") {
    for (const Engine& e : engine_table()) {
      if (name != e.name) continue;
      // userns reports its own failure from clone, with the same hint, at no probe cost.
      if (name != "userns") BERTH_CHECK(e.available());
      return &e;
    }
  }
  auto userns = probe_user_namespaces();
  if (userns.ok()) return &engine_table().front();
  std::string why = userns.error().message();
  for (const Engine& e : engine_table()) {
    if (std::string_view(e.name) == "userns" || !e.available().ok()) continue;
    // Berth's OCI bundles ask for a user namespace too (rootless runc needs one): no help here.
    if (std::string_view(e.name) == "oci") continue;
    if (said) *said = "engine auto: " + why + "; using " + e.name;
    return &e;
  }
  return make_error("engine", "auto", "no engine can run here: " + why)
      .with_hint("install runc, proot or fakechroot (Debian packages of those names)");
}

}  // namespace berth
