// The apptainer engine: hands the rootfs folder (a sandbox, in Apptainer's words) to Apptainer or
// SingularityCE when one is installed. Debian 12 packages neither, so this is not tested here;
// the command line is built from the spec by apptainer_argv() and unit-tested.
#include "runtime/apptainer_engine.h"

#include <unistd.h>

#include "core/env_list.h"
#include "runtime/fallback.h"
#include "runtime/spawn.h"

namespace berth {
namespace {

constexpr const char* kHint =
    "Debian 12 has no package: install Apptainer (https://apptainer.org) or SingularityCE "
    "(https://sylabs.io), or use --engine=userns, oci, proot or fakechroot";

Result<std::string> find_apptainer(const Engine& engine) {
  if (auto tool = engine_tool(engine); tool.ok()) return tool;
  return make_error("engine", "apptainer",
                    "not installed (neither apptainer nor singularity is on PATH)")
      .with_hint(kHint);
}

}  // namespace

Status apptainer_probe(const Engine& engine) {
  auto tool = find_apptainer(engine);
  if (!tool) return std::move(tool).error();
  return {};
}

Result<std::vector<std::string>> apptainer_argv(const ContainerSpec& spec,
                                                const std::string& tool) {
  if (spec.uid != 0 && spec.uid != ::getuid())
    return make_error("run", "user " + std::to_string(spec.uid),
                      "the apptainer engine runs as the calling user or, with --fakeroot, as root")
        .with_hint("use the userns or proot engine for -u");
  std::vector<std::string> argv = {tool,         "exec",       "--userns", "--containall",
                                   "--writable", "--cleanenv", "--pwd",    spec.cwd};
  if (spec.uid == 0 && ::getuid() != 0) argv.push_back("--fakeroot");
  if (!spec.hostname.empty()) argv.insert(argv.end(), {"--hostname", spec.hostname});
  for (const std::string& e : spec.env) argv.insert(argv.end(), {"--env", e});
  for (const Volume& v : spec.volumes)
    argv.insert(argv.end(), {"--bind", v.host + ":" + v.container + (v.read_only ? ":ro" : "")});
  argv.push_back(spec.rootfs);
  argv.insert(argv.end(), spec.argv.begin(), spec.argv.end());
  return argv;
}

RunOutcome run_apptainer(const EngineRun& run) {
  const ContainerSpec& spec = *run.spec;
  auto tool = find_apptainer(*run.engine);
  if (!tool) return RunOutcome{125, std::move(tool).error()};
  if (auto st = refuse_unsupported(spec, *run.engine); !st)
    return RunOutcome{125, std::move(st).error()};
  auto argv = apptainer_argv(spec, *tool);
  if (!argv) return RunOutcome{125, std::move(argv).error()};
  return spawn_and_wait(spec, *argv, current_environment());
}

}  // namespace berth
