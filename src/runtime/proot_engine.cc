// The proot engine: Debian's proot translates every path by ptrace, so it needs no namespaces.
// Emulated root (-0) or -i UID:GID; binds with -b; the workload's environment is proot's own.
// Slow on system calls (every one stops in the tracer) and without read-only binds.
#include "runtime/proot_engine.h"

#include <unistd.h>

#include "core/fs.h"
#include "runtime/fallback.h"
#include "runtime/spawn.h"

namespace berth {

std::vector<std::string> proot_argv(const ContainerSpec& spec, const std::string& proot_path,
                                    const MountPlan& plan, const std::string& command,
                                    const std::vector<HostBind>& extra) {
  // Not -k: Debian's proot 5.1 breaks directory opens and library loading with it.
  std::vector<std::string> argv = {proot_path, "--verbose=-1"};  // quiet but for fatal errors
  if (spec.uid == 0 && spec.gid == 0)
    argv.push_back("-0");
  else
    argv.insert(argv.end(), {"-i", std::to_string(spec.uid) + ":" + std::to_string(spec.gid)});
  argv.insert(argv.end(), {"-r", spec.rootfs, "-w", spec.cwd});
  auto bind = [&argv](const std::string& host, const std::string& ctr) {
    argv.push_back("-b");
    argv.push_back(host == ctr ? host : host + ":" + ctr);
  };
  for (const MountEntry& e : plan.entries) {
    switch (e.kind) {
      case MountKind::kBind:
      case MountKind::kRbind:
        // The minimal /dev's nodes come with the host's /dev, bound whole below.
        if (e.target.starts_with("/dev/")) continue;
        bind(e.source, e.target);
        break;
      case MountKind::kFs:
        // proot cannot make file systems: the host's /proc and /dev stand in, /tmp is the image's.
        if (e.target == "/proc" || e.target == "/dev") bind(e.target, e.target);
        break;
      case MountKind::kSymlink:
        break;  // under the host's /dev already
      case MountKind::kWriteFile:
        break;  // device edits only (plan_device_edits()); device_binds() covers them here
    }
  }
  for (const HostBind& b : extra) bind(b.host, b.container);
  argv.push_back(command);
  argv.insert(argv.end(), spec.argv.begin() + 1, spec.argv.end());
  return argv;
}

RunOutcome run_proot(const EngineRun& run) {
  const ContainerSpec& spec = *run.spec;
  auto failed = [](Error e) { return RunOutcome{125, std::move(e)}; };
  auto proot = engine_tool(*run.engine);
  if (!proot) return failed(std::move(proot).error());
  if (auto st = refuse_unsupported(spec, *run.engine); !st) return failed(std::move(st).error());
  auto plan = plan_mounts(spec, probe_host(spec));
  if (!plan) return failed(std::move(plan).error());
  if (auto st = prepare_rootfs(spec, true); !st) return failed(std::move(st).error());
  std::string scratch = path_join(run.work_dir, "proot-" + run.run_name);
  auto extra = device_binds(spec, scratch, *run.engine, true);
  if (!extra) {
    (void)remove_tree(scratch);  // best effort: the error matters more
    return failed(std::move(extra).error());
  }
  int code;
  auto command = resolve_command(spec, &code, PathView::kInRoot, *extra);
  if (!command) {
    (void)remove_tree(scratch);  // best effort, as above
    return RunOutcome{code, std::move(command).error()};
  }
  // proot ignores SIGTERM and the like: they go to its process group, the workload's.
  RunOutcome out = spawn_and_wait(spec, proot_argv(spec, *proot, *plan, *command, *extra),
                                  env_with_library_dirs(spec), "", Forward::kGroup);
  if (!spec.device_edits.empty()) (void)remove_tree(scratch);  // a leftover is harmless
  return out;
}

}  // namespace berth
