// The engine table and `auto`'s choice among its rows.
#include "runtime/engines.h"

#include <optional>

#include "runtime/apptainer_engine.h"
#include "runtime/fakechroot_engine.h"
#include "runtime/oci_engine.h"
#include "runtime/proot_engine.h"
#include "runtime/tool.h"

namespace berth {
namespace {

Status userns_available(const Engine&) {
  return probe_user_namespaces();
}

}  // namespace

RunOutcome run_userns_engine(const EngineRun& run) {
  return run_userns(*run.spec);
}

const std::vector<Engine>& engine_table() {
  // Fallbacks in order of preference: runc isolates like userns does (but needs user namespaces
  // as well, so `auto` passes it over), proot emulates everything but is slow on system calls,
  // fakechroot needs a glibc image. The facts are checked against behaviour in
  // tests/unit/runtime/engines_test.cc (EngineTable.*) and tests/e2e/test_engines.py.
  static const std::vector<Engine> table = {
      {.name = "userns",
       .summary = "user + mount namespaces (the default)",
       .root_inside = true,
       .read_only_volumes = true,
       .devices = true,
       .mounts_in_proc = true,
       .pid_namespace = true,
       .hostname = true,
       .needs_user_namespaces = true,
       .host_path_links = false,
       .tmpfs = true,
       .ipc_namespace = true,
       .network_namespace = true,
       .joinable = true,
       .runs_in_place = true,
       .tools = {},
       .package = "",
       .alias = nullptr,
       .available = userns_available,
       .run = run_userns_engine},
      {.name = "oci",
       .summary = "an OCI bundle run by runc (or crun)",
       .root_inside = true,
       .read_only_volumes = true,
       .devices = true,
       .mounts_in_proc = false,  // runc refuses mount points inside /proc
       .pid_namespace = true,
       .hostname = true,
       .needs_user_namespaces = true,  // rootless runc maps the caller in a user namespace
       .host_path_links = false,
       .tmpfs = true,
       .ipc_namespace = false,
       .network_namespace = false,
       .joinable = false,
       .runs_in_place = false,
       // runc is the one to install: Debian's crun fails on hybrid cgroups.
       .tools = {{"runc", "BERTH_RUNC"}, {"crun", nullptr}},
       .package = "runc",
       .alias = nullptr,
       .available = tool_available,
       .run = run_oci},
      {.name = "proot",
       .summary = "PRoot: ptrace path translation, no namespaces",
       .root_inside = true,  // emulated (-0)
       .read_only_volumes = false,
       .devices = true,  // as binds (device_binds())
       .mounts_in_proc = true,
       .pid_namespace = false,
       .hostname = false,
       .needs_user_namespaces = false,
       .host_path_links = false,
       .tmpfs = false,
       .ipc_namespace = false,
       .network_namespace = false,
       .joinable = false,
       .runs_in_place = false,
       .tools = {{"proot", "BERTH_PROOT"}},
       .package = "proot",
       .alias = nullptr,
       .available = tool_available,
       .run = run_proot},
      {.name = "fakechroot",
       .summary = "libfakechroot by LD_PRELOAD (glibc images)",
       .root_inside = false,  // the workload stays the calling user
       .read_only_volumes = false,
       .devices = false,
       .mounts_in_proc = false,
       .pid_namespace = false,
       .hostname = false,
       .needs_user_namespaces = false,
       .host_path_links = true,  // the host kernel follows the links libfakechroot leaves alone
       .tmpfs = false,
       .ipc_namespace = false,
       .network_namespace = false,
       .joinable = false,
       .runs_in_place = false,
       .tools = {{"fakechroot", "BERTH_LIBFAKECHROOT", find_libfakechroot}},
       .package = "fakechroot",
       .alias = nullptr,
       .available = tool_available,
       .run = run_fakechroot},
      {.name = "apptainer",
       .summary = "Apptainer or SingularityCE, when installed",
       .root_inside = true,  // --fakeroot
       .read_only_volumes = true,
       // device_binds() could become --bind options, but no Apptainer here to test them with.
       .devices = false,
       .mounts_in_proc = false,
       .pid_namespace = true,  // --containall
       .hostname = true,
       .needs_user_namespaces = true,  // --userns
       .host_path_links = false,
       .tmpfs = false,
       .ipc_namespace = false,
       .network_namespace = false,
       .joinable = false,
       .runs_in_place = false,
       .tools = {{"apptainer", "BERTH_APPTAINER"}, {"singularity", nullptr}},
       .package = "",  // Debian 12 packages neither
       .alias = "singularity",
       .available = apptainer_probe,
       .run = run_apptainer},
  };
  return table;
}

std::string engine_names() {
  std::string out;
  for (const Engine& e : engine_table()) out += std::string(e.name) + ", ";
  return out + "auto";
}

std::string engines_with(bool Engine::*fact) {
  std::vector<std::string> names;
  for (const Engine& e : engine_table())
    if (e.*fact) names.push_back(e.name);
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return out;
}

const Engine* find_engine(std::string_view name) {
  for (const Engine& e : engine_table())
    if (name == e.name || (e.alias != nullptr && name == e.alias)) return &e;
  return nullptr;
}

Result<EngineChoice> parse_engine(std::string_view word) {
  if (word == "auto") return EngineChoice{};
  if (const Engine* e = find_engine(word))
    return EngineChoice{e, e->alias != nullptr && word == e->alias ? e->alias : e->name};
  return make_error("engine", std::string(word), "unknown engine")
      .with_hint("one of: " + engine_names());
}

EngineChoice default_engine() {
  const Engine& first = engine_table().front();
  return EngineChoice{&first, first.name};
}

Result<std::string> engine_tool(const Engine& engine) {
  std::optional<Error> first;
  for (const EngineTool& t : engine.tools) {
    auto path = t.find != nullptr ? t.find(t, engine.package)
                                  : find_tool(t.name, t.env_var, engine.package);
    if (path) return path;
    if (!first) first = std::move(path).error();
  }
  if (!first) return make_error("engine", engine.name, "built in: it runs no tool");
  return std::move(*first);
}

Status tool_available(const Engine& engine) {
  auto tool = engine_tool(engine);
  if (!tool) return std::move(tool).error();
  return {};
}

Result<const Engine*> choose_engine(EngineChoice choice, std::string* said) {
  if (const Engine* e = choice.row) {
    // A built-in engine (userns) reports its own failure from clone, with the same hint, at no
    // probe cost.
    if (!e->tools.empty()) BERTH_CHECK(e->available(*e));
    return e;
  }
  auto userns = probe_user_namespaces();
  if (userns.ok()) return &engine_table().front();
  std::string why = userns.error().message();
  std::string packages;  // what would help here
  for (const Engine& e : engine_table()) {
    if (e.needs_user_namespaces) continue;  // no help here
    if (*e.package != '\0') packages += (packages.empty() ? "" : " or ") + std::string(e.package);
    if (!e.available(e).ok()) continue;
    if (said) *said = "engine auto: " + why + "; using " + e.name;
    return &e;
  }
  return make_error("engine", "auto", "no engine can run here: " + why)
      .with_hint("install " + packages + " (Debian packages of those names)");
}

}  // namespace berth
