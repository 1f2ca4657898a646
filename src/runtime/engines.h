// The engines that execute a ContainerSpec, as one table.
//
//   userns      user + mount namespaces, pivot_root (the default; userns_engine.cc)
//   proot       Debian's proot: ptrace path translation, no namespaces needed (proot_engine.cc)
//   fakechroot  Debian's libfakechroot by LD_PRELOAD, glibc images only (fakechroot_engine.cc)
//   oci         an OCI bundle run by runc (crun when runc is missing) (oci_engine.cc)
//   apptainer   Apptainer / SingularityCE when installed (apptainer_engine.cc)
//   auto        userns when the kernel allows it, else proot, else fakechroot
//
// Each engine has an availability probe (its tool on PATH, the kernel feature) whose error is
// one line naming the package to install, and a run function. The argv / config.json each
// fallback engine builds is a pure function of the spec, declared here for the unit tests.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "runtime/container_spec.h"
#include "runtime/mount_plan.h"

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

// --- shared by the engines (engines.cc) -----------------------------------------------------

/// Finds a tool: $`env_var` when set (must be executable), else `name` in $PATH, then in
/// /usr/sbin and /sbin. Fails with "NAME is not installed" and a hint naming `package`.
Result<std::string> find_tool(const char* name, const char* env_var, const char* package);

/// A colon-separated list (PATH, LD_LIBRARY_PATH) as its entries, empty ones kept.
std::vector<std::string> split_path(std::string_view list);

/// For engines without read-only binds, PID or UTS namespaces: refuses a read-only volume
/// (naming `engine`), warns that --pid-ns and --hostname are ignored.
Status refuse_unsupported(const ContainerSpec& spec, std::string_view engine);

/// The spec's PATH ("PATH=..." in spec.env), else the default search path.
std::string spec_path(const ContainerSpec& spec);

/// How container paths are looked up in the rootfs.
enum class PathView {
  kInRoot,  ///< as after pivot_root: absolute symlinks stay inside the root (openat2)
  kHost,    ///< as the host kernel sees rootfs + path (fakechroot's view, whose links are host paths)
};

/// A bind a fallback engine expresses itself (proot -b, an OCI bind mount).
struct HostBind {
  std::string host;
  std::string container;
  bool read_only = false;
  bool operator==(const HostBind&) const = default;
};

/// Resolves the workload's argv[0] inside the rootfs the way execvp would inside the
/// container: an absolute container path to a regular executable file, found in the rootfs or
/// bound there by one of `binds` (a host binary a device layer adds). On failure `exit_code`
/// says 127 (not found) or 126 (not executable), else 125.
Result<std::string> resolve_command(const ContainerSpec& spec, int* exit_code,
                                    PathView view = PathView::kInRoot,
                                    const std::vector<HostBind>& binds = {});

/// Where spawn_and_wait() sends the signals it forwards.
enum class Forward {
  kChild,  ///< to the child, which passes them on (runc) or is the workload (fakechroot)
  kGroup,  ///< to the child's own process group: the child ignores them but its workload must
           ///< get them (proot); on a foreground terminal the child stays in ours instead
};

/// Starts `argv` (argv[0] a host path) with `envp` in host folder `cwd` ("" for this one), stdin
/// from /dev/null unless spec.stdin_open; forwards SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1,
/// SIGUSR2 as `forward` says and waits. Exit status as RunOutcome: the child's status, 128+N
/// for a signal.
RunOutcome spawn_and_wait(const ContainerSpec& spec, const std::vector<std::string>& argv,
                          const std::vector<std::string>& envp, const std::string& cwd = "",
                          Forward forward = Forward::kChild);

/// The spec's device edits as host binds: a kTmpfs (and Berth's run directory when an edit lands
/// in it) becomes a folder under `scratch` (which the caller removes), a kSymlink or kFile
/// beneath one is written there, a kFile elsewhere is written beside them and bound read-only;
/// kBind stays a bind. A kSymlink outside a kTmpfs to a path an earlier edit bound becomes a
/// bind of that host path; any other cannot be made without changing the image: skipped when
/// optional, else an error naming the engine. Writes nothing unless `write` (tests plan without writing).
Result<std::vector<HostBind>> device_binds(const ContainerSpec& spec, const std::string& scratch,
                                           std::string_view engine, bool write);

/// What every fallback engine does to the rootfs (a private copy) before a run: the working
/// directory is created when missing and, with `identity`, /etc/passwd and /etc/group gain the
/// user's entries (as the userns engine does).
Status prepare_rootfs(const ContainerSpec& spec, bool identity);

/// spec.env with spec.ld_library_dirs put in front of LD_LIBRARY_PATH (fallback engines do not
/// regenerate the loader cache).
std::vector<std::string> env_with_library_dirs(const ContainerSpec& spec);

// --- pure builders, one per engine ----------------------------------------------------------

/// proot's argv for `spec`: `proot_path` first, then the plan's binds (file systems proot cannot
/// make are the host's: /dev, /proc; the image's own /tmp), `extra` (device_binds()), and the
/// workload, `command` being resolve_command()'s result.
std::vector<std::string> proot_argv(const ContainerSpec& spec, const std::string& proot_path,
                                    const MountPlan& plan, const std::string& command,
                                    const std::vector<HostBind>& extra);

/// The OCI runtime config.json for `spec`, run rootless by host user `host_uid`/`host_gid`,
/// with the plan's mounts (runc creates the minimal /dev's device nodes itself) and `extra`.
/// Fails where runc cannot express the spec: a user other than root (runc needs container
/// UID 0 mapped, and a rootless user can map only its own ID).
Result<nlohmann::json> oci_config(const ContainerSpec& spec, uid_t host_uid, gid_t host_gid,
                                  const MountPlan& plan, const std::vector<HostBind>& extra);

/// What fakechroot needs to run `spec`: the program to exec on the host, its argv and envp.
struct FakechrootLaunch {
  std::vector<std::string> argv;  ///< argv[0]: the image's loader as a host path
  std::vector<std::string> env;
};

/// Builds the launch: the image's loader `loader` (container path of the workload's PT_INTERP,
/// already checked), `command` (the resolved workload), the library dirs that exist in the
/// image, and `library` (libfakechroot.so's host path). Volumes whose host and container paths
/// are equal go in FAKECHROOT_EXCLUDE_PATH with the host's /dev, /proc, /sys; others are
/// links made by prepare_fakechroot_volumes().
FakechrootLaunch fakechroot_launch(const ContainerSpec& spec, const std::string& loader,
                                   const std::string& command,
                                   const std::vector<std::string>& lib_dirs,
                                   const std::string& library);

/// A symlink target rewritten between an image's absolute form ("/x") and the host-absolute
/// form fakechroot needs and writes ("<prefix>/x"): with `from` empty, absolute targets gain
/// `to` in front; otherwise a target equal to `from` or under it has `from` replaced by `to`.
/// Nothing (nullopt) when the target is left alone.
std::optional<std::string> rewrite_link_target(std::string_view target, std::string_view from,
                                               std::string_view to);

/// Rewrites every symlink beneath `rootfs` (not following any) with rewrite_link_target(),
/// each atomically (a new link renamed over the old). Returns how many changed.
Result<size_t> rewrite_symlinks(const std::string& rootfs, std::string_view from,
                                std::string_view to);

/// Apptainer's command line for `spec` (`tool`: apptainer or singularity): exec --userns
/// --containall --writable on the rootfs folder, the environment by --env, volumes by --bind.
Result<std::vector<std::string>> apptainer_argv(const ContainerSpec& spec, const std::string& tool);

/// The ELF interpreter (PT_INTERP) of the file at `fd`: "" for a static executable; an error
/// when the file is not a 64-bit ELF for this machine (`what` names it in the error).
Result<std::string> elf_interpreter(int fd, const std::string& what);

/// The fallback engines' availability probes: their tool is installed (one line naming the
/// Debian package when not).
Status proot_probe();
Status fakechroot_probe();
Status oci_probe();
Status apptainer_probe();

/// The engines' run functions (engine_table() points at them).
RunOutcome run_userns_engine(const EngineRun& run);
RunOutcome run_proot(const EngineRun& run);
RunOutcome run_fakechroot(const EngineRun& run);
RunOutcome run_oci(const EngineRun& run);
RunOutcome run_apptainer(const EngineRun& run);

}  // namespace berth
