// The engine table, `auto`, and what the fallback engines share: finding their tool, resolving
// the workload inside the rootfs, running a host process with signals forwarded, device edits
// as binds.
#include "runtime/engines.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/env.h"
#include "core/fs.h"
#include "core/log.h"
#include "runtime/identity.h"
#include "runtime/mount_plan.h"
#include "runtime/root_path.h"

extern char** environ;

namespace berth {
namespace {

constexpr const char* kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
constexpr int kForwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

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

Result<std::string> find_tool(const char* name, const char* env_var, const char* package) {
  auto executable = [](const std::string& p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  if (env_var != nullptr) {
    if (const char* v = ::getenv(env_var); v != nullptr && *v != '\0') {
      if (executable(v)) return std::string(v);
      return make_error("engine", std::string(env_var) + "=" + v, "not an executable file");
    }
  }
  // runc is in /usr/sbin, not always on a user's PATH.
  for (const std::string& dir : split_path(env_or("PATH", "") + ":/usr/sbin:/sbin")) {
    if (dir.empty() || dir.front() != '/') continue;
    std::string candidate = path_join(dir, name);
    if (executable(candidate)) return candidate;
  }
  Error e = make_error("engine", name, "not installed");
  if (package != nullptr && *package != '\0')
    return std::move(e).with_hint(std::string("install the Debian package '") + package + "'");
  return e;
}

std::vector<std::string> split_path(std::string_view list) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= list.size()) {
    size_t j = list.find(':', i);
    if (j == std::string_view::npos) j = list.size();
    out.emplace_back(list.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

Status refuse_unsupported(const ContainerSpec& spec, std::string_view engine) {
  for (const Volume& v : spec.volumes)
    if (v.read_only)
      return make_error("mount", "volume " + v.host + ":" + v.container + ":ro",
                        "the " + std::string(engine) + " engine cannot make a volume read-only")
          .with_hint("use the userns or oci engine, or drop :ro");
  if (spec.pid_namespace)
    log::warn("the {} engine has no PID namespace: --pid-ns ignored", engine);
  if (!spec.hostname.empty())
    log::warn("the {} engine cannot set the host name: --hostname ignored", engine);
  return {};
}

std::string spec_path(const ContainerSpec& spec) {
  for (const std::string& e : spec.env)
    if (e.starts_with("PATH=")) return e.substr(5);
  return kDefaultPath;
}

Result<std::string> resolve_command(const ContainerSpec& spec, int* exit_code, PathView view,
                                    const std::vector<HostBind>& binds) {
  *exit_code = 125;
  if (spec.argv.empty()) return make_error("run", spec.rootfs, "no command given");
  UniqueFd root = BERTH_TRY(open_file(spec.rootfs, O_PATH | O_DIRECTORY));
  const std::string& file = spec.argv.front();
  std::string quoted = "\"" + file + "\"";  // exec: "name": ...
  // What execve would say about one candidate: 0 when it is a regular executable file.
  auto check = [&](const std::string& path) -> int {
    auto bound = std::find_if(binds.begin(), binds.end(),
                              [&path](const HostBind& b) { return b.container == path; });
    UniqueFd fd(bound != binds.end()           ? ::open(bound->host.c_str(), O_PATH | O_CLOEXEC)
                : view == PathView::kInRoot ? open_in_root(root.get(), path.c_str(), O_PATH)
                                            : ::openat(root.get(), path.c_str() + 1, O_PATH | O_CLOEXEC));
    if (!fd.valid()) return errno;
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) return errno;
    if (S_ISDIR(st.st_mode)) return EACCES;
    if (!S_ISREG(st.st_mode) || (st.st_mode & 0111) == 0) return EACCES;
    return 0;
  };
  if (file.find('/') != std::string::npos) {
    std::string path = file.front() == '/' ? file : path_join(spec.cwd, file);
    int err = check(path);
    if (err == 0) return path;
    *exit_code = err == ENOENT || err == ENOTDIR ? 127 : 126;
    return sys_error("exec:", quoted, err);
  }
  bool denied = false;
  for (std::string dir : split_path(spec_path(spec))) {
    if (dir.empty() || dir.front() != '/') dir = path_join(spec.cwd, dir);
    std::string candidate = path_join(dir, file);
    int err = check(candidate);
    if (err == 0) return candidate;
    if (err == EACCES) denied = true;
  }
  *exit_code = denied ? 126 : 127;
  if (denied) return sys_error("exec:", quoted, EACCES);
  return make_error("exec:", quoted, "executable file not found in $PATH");
}

namespace {

/// Where forwarded signals go: the running child's pid, or minus its process group.
volatile pid_t g_engine_child = 0;

void forward_to_engine_child(int sig, siginfo_t* info, void*) {
  // A terminal's signal (SI_KERNEL) already reached the child: it is in our process group.
  if (info != nullptr && info->si_code == SI_KERNEL) return;
  pid_t pid = g_engine_child;
  if (pid != 0) (void)::kill(pid, sig);
}

}  // namespace

RunOutcome spawn_and_wait(const ContainerSpec& spec, const std::vector<std::string>& argv,
                          const std::vector<std::string>& envp, const std::string& cwd,
                          Forward forward) {
  std::vector<char*> args, envs;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const std::string& e : envp) envs.push_back(const_cast<char*>(e.c_str()));
  envs.push_back(nullptr);
  UniqueFd devnull;
  if (!spec.stdin_open) {
    devnull.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!devnull.valid()) return RunOutcome{125, sys_error("open", "/dev/null")};
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return RunOutcome{125, sys_error("pipe", argv.front())};
  UniqueFd report_r(fds[0]), report_w(fds[1]);
  // A workload on our foreground terminal must stay in our process group to read from it.
  bool on_terminal = false;
  for (int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO})
    on_terminal = on_terminal || (::isatty(fd) && ::tcgetpgrp(fd) == ::getpgrp());
  bool own_group = forward == Forward::kGroup && !on_terminal;

  sigset_t block, old_mask;
  sigemptyset(&block);
  for (int sig : kForwarded) sigaddset(&block, sig);
  ::sigprocmask(SIG_BLOCK, &block, &old_mask);
  pid_t pid = ::fork();
  if (pid == 0) {
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int sig : kForwarded) (void)::sigaction(sig, &dfl, nullptr);  // cannot fail for these
    ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    if (own_group) (void)::setpgid(0, 0);  // the parent does it too; one of them wins the race
    if (devnull.valid() && ::dup2(devnull.get(), STDIN_FILENO) < 0) {
      int err = errno;
      (void)!::write(report_w.get(), &err, sizeof err);
      ::_exit(125);
    }
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) {
      int err = errno;
      (void)!::write(report_w.get(), &err, sizeof err);
      ::_exit(125);
    }
    ::execve(args[0], args.data(), envs.data());
    int err = errno;
    (void)!::write(report_w.get(), &err, sizeof err);  // the parent reads a short report as none
    ::_exit(125);
  }
  if (pid < 0) {
    int err = errno;
    ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    return RunOutcome{125, sys_error("fork", argv.front(), err)};
  }
  if (own_group) (void)::setpgid(pid, pid);  // EACCES once it has exec'd: it did it itself
  g_engine_child = own_group ? -pid : pid;
  struct sigaction sa, old_sa[std::size(kForwarded)];
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = forward_to_engine_child;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < std::size(kForwarded); ++i) ::sigaction(kForwarded[i], &sa, &old_sa[i]);
  ::sigprocmask(SIG_UNBLOCK, &block, nullptr);

  report_w.reset();
  int exec_err = 0;
  ssize_t n;
  while ((n = ::read(report_r.get(), &exec_err, sizeof exec_err)) < 0 && errno == EINTR) {
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  g_engine_child = 0;
  for (size_t i = 0; i < std::size(kForwarded); ++i) ::sigaction(kForwarded[i], &old_sa[i], nullptr);
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  if (n == sizeof exec_err) return RunOutcome{125, sys_error("exec", argv.front(), exec_err)};
  RunOutcome out;
  if (WIFEXITED(status)) out.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) out.exit_code = 128 + WTERMSIG(status);
  return out;
}

namespace {

bool is_under(const std::string& path, const std::string& dir) {
  return path.size() > dir.size() && path.starts_with(dir) && path[dir.size()] == '/';
}

}  // namespace

Result<std::vector<HostBind>> device_binds(const ContainerSpec& spec, const std::string& scratch,
                                           std::string_view engine, bool write) {
  std::vector<HostBind> out;
  // kTmpfs targets and the scratch folders standing in for them.
  std::vector<std::pair<std::string, std::string>> tmpfs;
  std::vector<std::string> sealed;  // read-only kTmpfs folders, closed once filled
  auto add_tmpfs = [&](const std::string& target, bool read_only) -> Status {
    std::string host = path_join(scratch, "tmpfs" + std::to_string(tmpfs.size()));
    if (write) BERTH_CHECK(make_dirs(host));
    if (read_only) sealed.push_back(host);
    tmpfs.emplace_back(target, host);
    out.push_back({host, target, false});
    return {};
  };
  auto under_tmpfs = [&tmpfs](const std::string& target) -> std::string {
    for (const auto& [ctr, host] : tmpfs)
      if (is_under(target, ctr)) return host + target.substr(ctr.size());
    return "";
  };
  // As plan_mounts() does: Berth's run directory is a scratch folder whenever an edit lands in
  // it and no edit makes it one.
  bool run_dir_needed = false, run_dir_given = false;
  for (const DeviceEdit& d : spec.device_edits) {
    run_dir_needed |= is_under(d.target, kBerthRunDir);
    run_dir_given |= d.kind == DeviceEdit::Kind::kTmpfs && d.target == kBerthRunDir;
  }
  if (run_dir_needed && !run_dir_given) BERTH_CHECK(add_tmpfs(kBerthRunDir, false));
  int files = 0;
  for (const DeviceEdit& d : spec.device_edits) {
    std::string target = BERTH_TRY(normalize_container_path(d.target));
    // runc refuses mount points inside /proc: the optional /proc/driver/nvidia narrowing is left
    // out there, as it is on a host without the driver's /proc entries.
    if (engine == "oci" && !d.required && (target == "/proc" || target.starts_with("/proc/"))) {
      log::debug("oci engine: {} left out (runc mounts nothing inside /proc)", target);
      continue;
    }
    switch (d.kind) {
      case DeviceEdit::Kind::kBind:
        if (!path_exists(d.source)) {
          if (!d.required) continue;
          return make_error("device", d.source, "host path does not exist");
        }
        out.push_back({d.source, target, d.read_only});
        break;
      case DeviceEdit::Kind::kTmpfs:
        BERTH_CHECK(add_tmpfs(target, d.read_only));
        break;
      case DeviceEdit::Kind::kFile:
      case DeviceEdit::Kind::kSymlink: {
        std::string host = under_tmpfs(target);
        if (host.empty() && d.kind == DeviceEdit::Kind::kFile) {
          // Written beside the scratch folders and bound read-only over the target.
          host = path_join(scratch, "file" + std::to_string(files++));
          out.push_back({host, target, true});
        }
        if (host.empty() && d.kind == DeviceEdit::Kind::kSymlink) {
          // A link to a path an earlier edit bound (a host binary staged in the run directory):
          // the same host file bound at the link's place does what the link would.
          auto bound = std::find_if(out.begin(), out.end(),
                                    [&d](const HostBind& b) { return b.container == d.source; });
          if (bound != out.end()) {
            out.push_back({bound->host, target, bound->read_only});
            break;
          }
          if (!d.required) {
            // An optional convenience (a binary's link in /usr/bin): this engine cannot write
            // it without changing the image, so it goes without.
            log::debug("{} engine: {} left out", engine, target);
            continue;
          }
        }
        if (host.empty())
          return make_error("device", target,
                            std::string("the ") + std::string(engine) +
                                " engine cannot create links in the image")
              .with_hint("--gpus and --device need the userns or oci engine");
        if (!write) break;
        BERTH_CHECK(make_dirs(host.substr(0, host.rfind('/'))));
        if (d.kind == DeviceEdit::Kind::kFile) {
          BERTH_CHECK(write_file_atomic(host, d.source, 0644, Durability::kProcessSafe));
        } else if (::symlink(d.source.c_str(), host.c_str()) != 0) {
          return sys_error("symlink", host);
        }
        break;
      }
    }
  }
  // A read-only kTmpfs (mode 0555) is closed once its files are written.
  for (const std::string& dir : sealed)
    if (write && ::chmod(dir.c_str(), 0555) != 0) return sys_error("chmod", dir);
  return out;
}

Status prepare_rootfs(const ContainerSpec& spec, bool identity) {
  UniqueFd root = BERTH_TRY(open_file(spec.rootfs, O_PATH | O_DIRECTORY));
  if (make_path_in_root(root.get(), spec.cwd.c_str(), false) != 0)
    return sys_error("create working directory", spec.cwd);
  if (identity) return ensure_identity(root.get(), spec).with_context("set up /etc/passwd");
  return {};
}

std::vector<std::string> env_with_library_dirs(const ContainerSpec& spec) {
  std::vector<std::string> env = spec.env;
  if (spec.ld_library_dirs.empty()) return env;
  std::string dirs;
  for (const std::string& d : spec.ld_library_dirs) dirs += (dirs.empty() ? "" : ":") + d;
  for (std::string& e : env) {
    if (e.starts_with("LD_LIBRARY_PATH=")) {
      std::string old = e.substr(16);
      e = "LD_LIBRARY_PATH=" + dirs + (old.empty() ? "" : ":" + old);
      return env;
    }
  }
  env.push_back("LD_LIBRARY_PATH=" + dirs);
  return env;
}

}  // namespace berth
