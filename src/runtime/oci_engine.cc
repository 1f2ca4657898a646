// The oci engine: an OCI runtime bundle (config.json beside a rootfs path) run by runc, or by
// crun when runc is missing. Rootless: a user namespace mapping container root to the caller,
// no cgroups (rootless runc skips them when no cgroupsPath is given), state under a per-user
// folder. runc's own log goes to a file in the bundle; an error there is the run's error.
#include "runtime/oci_engine.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sstream>

#include "core/env.h"
#include "core/env_list.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/log.h"
#include "core/runtime_dir.h"
#include "core/scope_guard.h"
#include "runtime/fallback.h"
#include "runtime/library_path.h"
#include "runtime/spawn.h"

namespace berth {
namespace {

/// Mount flags as OCI option words.
struct FlagWord {
  unsigned long flag;
  const char* word;
};
constexpr FlagWord kFlagWords[] = {
    {MS_RDONLY, "ro"},     {MS_NOSUID, "nosuid"},           {MS_NODEV, "nodev"},
    {MS_NOEXEC, "noexec"}, {MS_STRICTATIME, "strictatime"},
};

/// Capabilities of container root, as Docker grants them by default.
constexpr const char* kCapabilities[] = {
    "CAP_CHOWN",   "CAP_DAC_OVERRIDE", "CAP_FSETID",           "CAP_FOWNER",
    "CAP_MKNOD",   "CAP_NET_RAW",      "CAP_SETGID",           "CAP_SETUID",
    "CAP_SETFCAP", "CAP_SETPCAP",      "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT",
    "CAP_KILL",    "CAP_AUDIT_WRITE",
};

nlohmann::json bind_mount(const std::string& source, const std::string& target, bool recursive,
                          bool read_only, unsigned long flags = 0, unsigned long propagation = 0) {
  nlohmann::json options = {recursive ? "rbind" : "bind"};
  // -v ...:nosuid,rslave: OCI's own option words.
  if (flags & MS_NOSUID) options.push_back("nosuid");
  if (flags & MS_NODEV) options.push_back("nodev");
  if (flags & MS_NOEXEC) options.push_back("noexec");
  bool rec = propagation & MS_REC;
  if (propagation & MS_SLAVE) options.push_back(rec ? "rslave" : "slave");
  if (propagation & MS_UNBINDABLE) options.push_back(rec ? "runbindable" : "unbindable");
  if (read_only) {
    // The remount read-only keeps the locked flags of a host mount only when they are named.
    for (const char* w : {"nosuid", "nodev", "noexec"})
      if (target == "/sys") options.push_back(w);
    options.push_back("ro");
  }
  return {{"destination", target}, {"type", "bind"}, {"source", source}, {"options", options}};
}

/// Where runc keeps its state for this user: runc/ in the user's runtime folder
/// (core/runtime_dir.h: the site policy's runtime_dir, $XDG_RUNTIME_DIR, /tmp, or the private
/// fallback when another user took the shared name first).
Result<std::string> state_root(const std::string& runtime_dir) {
  std::string dir = path_join(BERTH_TRY(make_runtime_dir("oci", runtime_dir)), "runc");
  BERTH_CHECK(make_own_dir(dir, "oci", "runtime state folder"));
  return dir;
}

/// The first error runc (or crun) logged, in its JSON log format; "" when none.
std::string logged_error(const std::string& log_path) {
  auto text = read_file(log_path);
  if (!text) return "";  // no log: the runtime never started logging, nothing to add
  std::istringstream lines(*text);
  std::string line;
  while (std::getline(lines, line)) {
    auto j = parse_json_or_discarded(line);
    if (string_field(j, "level") == "error") {
      std::string msg = string_field(j, "msg");
      return msg.empty() ? line : msg;
    }
  }
  return "";
}

}  // namespace

Result<nlohmann::json> oci_config(const ContainerSpec& spec, uid_t host_uid, gid_t host_gid,
                                  const MountPlan& plan, const std::vector<HostBind>& extra) {
  if (spec.uid != 0 || spec.gid != 0)
    return make_error("oci", "user " + std::to_string(spec.uid) + ":" + std::to_string(spec.gid),
                      "the oci engine runs the workload as root inside: rootless runc needs "
                      "container UID 0 mapped, and an unprivileged user can map only one ID")
        .with_hint("use the userns or proot engine for -u");
  nlohmann::json caps = nlohmann::json::array();
  for (const char* c : kCapabilities) caps.push_back(c);
  nlohmann::json process = {
      {"terminal", spec.tty},
      {"user", {{"uid", 0}, {"gid", 0}}},
      {"args", spec.argv},
      {"env", env_with_library_dirs(spec)},
      {"cwd", spec.cwd},
      {"capabilities",
       {{"bounding", caps}, {"effective", caps}, {"permitted", caps}, {"ambient", caps}}},
      {"noNewPrivileges", true},
  };
  nlohmann::json mounts = nlohmann::json::array();
  for (const MountEntry& e : plan.entries) {
    switch (e.kind) {
      case MountKind::kFs: {
        nlohmann::json options = nlohmann::json::array();
        for (const FlagWord& f : kFlagWords)
          if (e.flags & f.flag) options.push_back(f.word);
        std::istringstream data(e.data);
        for (std::string opt; std::getline(data, opt, ',');)
          if (!opt.empty()) options.push_back(opt);
        mounts.push_back({{"destination", e.target},
                          {"type", e.fstype},
                          {"source", e.source},
                          {"options", options}});
        // With -t the plan binds the host's /dev/pts for a terminal handed over (left out
        // below); runc makes a console of its own, which needs the container's own devpts.
        if (e.target == "/dev" && spec.tty)
          mounts.push_back(
              {{"destination", "/dev/pts"},
               {"type", "devpts"},
               {"source", "devpts"},
               {"options", {"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}}});
        break;
      }
      case MountKind::kBind:
      case MountKind::kRbind:
        // runc binds the minimal /dev's nodes itself (a user namespace cannot mknod).
        if (!spec.host_dev && e.target.starts_with("/dev/")) continue;
        mounts.push_back(bind_mount(e.source, e.target, e.kind == MountKind::kRbind, e.read_only,
                                    e.flags, e.propagation));
        break;
      case MountKind::kSymlink:
        break;  // runc makes /dev/fd, /dev/stdin, ... and /dev/ptmx
      case MountKind::kWriteFile:
        break;  // device edits only (plan_device_edits()); device_binds() covers them here
    }
  }
  for (const HostBind& b : extra)
    mounts.push_back(bind_mount(b.host, b.container, true, b.read_only));
  nlohmann::json namespaces = {{{"type", "user"}}, {{"type", "mount"}}};
  if (spec.pid_namespace) namespaces.push_back({{"type", "pid"}});
  if (!spec.hostname.empty()) namespaces.push_back({{"type", "uts"}});
  nlohmann::json config = {
      {"ociVersion", "1.0.2"},
      {"process", process},
      {"root", {{"path", spec.rootfs}, {"readonly", !spec.writable_rootfs}}},
      {"mounts", mounts},
      {"linux",
       {{"uidMappings", {{{"containerID", 0}, {"hostID", host_uid}, {"size", 1}}}},
        {"gidMappings", {{{"containerID", 0}, {"hostID", host_gid}, {"size", 1}}}},
        {"namespaces", namespaces}}},
  };
  if (!spec.hostname.empty()) config["hostname"] = spec.hostname;
  return config;
}

RunOutcome run_oci(const EngineRun& run) {
  auto failed = [](Error e) { return RunOutcome{125, std::move(e)}; };
  ContainerSpec spec = *run.spec;
  // A terminal only when there is one to hand over (runc's console needs a real one).
  spec.tty = spec.tty && ::isatty(STDIN_FILENO);
  auto runtime = engine_tool(*run.engine);  // runc, else crun
  if (!runtime) return failed(std::move(runtime).error());
  if (auto st = refuse_unsupported(spec, *run.engine); !st) return failed(std::move(st).error());
  auto plan = plan_mounts(spec, probe_host(spec));
  if (!plan) return failed(std::move(plan).error());
  if (auto st = prepare_rootfs(spec, true); !st) return failed(std::move(st).error());
  auto state = state_root(run.runtime_dir);
  if (!state) return failed(std::move(state).error());

  std::string bundle = path_join(run.work_dir, "oci-" + run.run_name);
  // Best effort, on every way out: a leftover bundle is harmless.
  auto cleanup = on_scope_exit([&bundle] { (void)remove_tree(bundle); });
  if (auto st = make_dirs(bundle, 0700); !st) return failed(std::move(st).error());
  auto extra = device_binds(spec, path_join(bundle, "scratch"), *run.engine, true);
  if (!extra) return failed(std::move(extra).error());
  int code;
  if (auto command = resolve_command(spec, &code, PathView::kInRoot, *extra); !command)
    return RunOutcome{code, std::move(command).error()};
  auto config = oci_config(spec, ::geteuid(), ::getegid(), *plan, *extra);
  if (!config) return failed(std::move(config).error());
  std::string log_path = path_join(bundle, "runtime.log");
  if (auto st = write_file_atomic(path_join(bundle, "config.json"), config->dump(1), 0600,
                                  Durability::kProcessSafe);
      !st)
    return failed(std::move(st).error());
  std::vector<std::string> argv = {*runtime,       "--root", *state, "--log",    log_path,
                                   "--log-format", "json",   "run",  "--bundle", bundle};
  // A launcher's descriptors (runtime/launcher.h): runc and crun keep 3 .. 2+N, so N reaches
  // the highest kept one (any open between them are passed too).
  if (!spec.kept_fds.empty())
    argv.insert(argv.end(), {"--preserve-fds", std::to_string(spec.kept_fds.back() - 2)});
  argv.push_back(run.run_name);
  // The runtime gets the caller's environment (it may need XDG_RUNTIME_DIR and the like); the
  // workload's comes from config.json.
  std::vector<std::string> env = current_environment();
  // A killed berth kills runc (its parent death signal), which leaves the container running:
  // the runtime's forced delete ends it.
  std::vector<std::string> orphan = {*runtime, "--root", *state, "delete", "--force", run.run_name};
  RunOutcome out = spawn_and_wait(spec, argv, env, "", Forward::kChild, orphan,
                                  /*contiguous_fds=*/true);
  if (!out.error) {
    if (std::string err = logged_error(log_path); !err.empty())
      out = RunOutcome{125, make_error("run", run.run_name, *runtime + ": " + err)};
  }
  return out;
}

}  // namespace berth
