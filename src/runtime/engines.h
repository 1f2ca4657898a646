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

struct Engine;

/// What one run gives an engine besides the spec.
struct EngineRun {
  const ContainerSpec* spec = nullptr;
  const Engine* engine = nullptr;  ///< the row of engine_table() that runs it
  std::string work_dir;  ///< a per-container folder the engine may use (bundle, scratch); exists
  std::string run_name;  ///< unique among running containers (runc's container ID)
  /// Where per-run runtime state goes (the site policy's runtime_dir); "" for the engine's
  /// own choice ($XDG_RUNTIME_DIR). Today the oci engine's runc state root.
  std::string runtime_dir;
};

/// One host program or library an engine runs, and how it is found.
struct EngineTool {
  const char* name;     ///< as `berth info` lists it; the executable looked up on PATH
  const char* env_var;  ///< the variable that names it explicitly ("BERTH_RUNC"), or nullptr
  /// How it is found when it is not an executable on PATH (a library); nullptr: find_tool().
  Result<std::string> (*find)(const EngineTool& tool, const char* package) = nullptr;
};

/// One engine as a row of facts: what it can do, what it needs, how it runs. Runtime and cli
/// read these columns instead of comparing engine names.
struct Engine {
  const char* name;
  const char* summary;
  bool root_inside;            ///< the default user (root) is uid 0 inside, real or emulated
  bool read_only_volumes;      ///< honours -v HOST:CTR:ro
  bool devices;                ///< takes Berth's device edits (--gpus, --device, CDI)
  bool mounts_in_proc;         ///< can mount inside /proc (runc refuses to)
  bool pid_namespace;          ///< honours --pid-ns
  bool hostname;               ///< honours --hostname (a UTS namespace)
  bool needs_user_namespaces;  ///< cannot run where unprivileged user namespaces are disabled
  bool host_path_links;    ///< the rootfs's absolute symlinks must name host paths while it runs
  bool tmpfs;              ///< mounts --tmpfs
  bool ipc_namespace;      ///< honours --ipc private (an IPC namespace of the container's own)
  bool network_namespace;  ///< honours --network none (a network namespace with only lo)
  bool joinable;           ///< its containers have namespaces of their own, which berth exec joins
  /// Runs a root filesystem directory, or a squashfs image's shared mount, in place: with no
  /// per-container state (`berth run DIR`, `berth run FILE.sqsh`).
  bool runs_in_place;
  std::vector<EngineTool> tools;  ///< host tools it runs, the first found used; none: built in
  const char* package;            ///< Debian package that provides the tool ("" for none)
  const char* alias;              ///< another name --engine accepts, or nullptr
  /// Empty Status when the engine can run here; else one line saying what is missing.
  Status (*available)(const Engine& engine);
  RunOutcome (*run)(const EngineRun& run);
};

/// Every engine, "auto" excluded, in order of preference; the first is the default (userns).
const std::vector<Engine>& engine_table();

/// An engine as a command line (--engine), the site policy (default_engine, allowed_engines)
/// or a container record ("engine") names it, parsed there once by parse_engine(): a row of
/// engine_table(), or auto. Two choices are equal when they name the same row (an alias names
/// its row); `spelled` keeps the word as given, for messages and for writing the record back
/// as it was, and nothing compares it.
struct EngineChoice {
  const Engine* row = nullptr;        ///< nullptr: auto, choose_engine()'s pick at each run
  std::string_view spelled = "auto";  ///< the row's name or alias as given, or "auto"
  bool is_auto() const { return row == nullptr; }
  friend bool operator==(const EngineChoice& a, const EngineChoice& b) { return a.row == b.row; }
};

/// The engine `word` names: a row's name or alias, or "auto". Anything else is "engine WORD:
/// unknown engine", with the names accepted as hint.
Result<EngineChoice> parse_engine(std::string_view word);

/// The default engine, the table's first row (userns), by its name.
EngineChoice default_engine();

/// The names `--engine` accepts: the table's and "auto".
std::string engine_names();

/// The engine `choice` designates, available here. For auto: userns when user namespaces
/// work, else the first available fallback that needs none (proot, fakechroot: Berth's OCI
/// bundles ask for a user namespace too); `said` receives the line to print once (empty when
/// no choice was made).
Result<const Engine*> choose_engine(EngineChoice choice, std::string* said);

/// The names of the engines whose column `fact` is true, for a hint: "userns, oci or proot".
std::string engines_with(bool Engine::*fact);

/// The row named `name` (or by its alias), nullptr when there is none ("auto" included).
const Engine* find_engine(std::string_view name);

/// Where the engine's tool is: the first of `engine.tools` found, else the first one's error
/// (one line naming the Debian package). An error for a built-in engine.
Result<std::string> engine_tool(const Engine& engine);

/// The availability probe of an engine with a tool: engine_tool() finds one.
Status tool_available(const Engine& engine);

/// The userns engine's run function (run_userns() for the table).
RunOutcome run_userns_engine(const EngineRun& run);

}  // namespace berth
