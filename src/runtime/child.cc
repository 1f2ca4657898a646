// The child between clone and exec, and the minimal init of a PID namespace.
#include "runtime/child.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>

#include "core/root_path.h"
#include "core/signals.h"
#include "runtime/launcher.h"
#include "runtime/netns.h"
#include "runtime/rlimits.h"
#include "runtime/root_emulation.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

namespace berth {
namespace {

/// Writes `text` to /proc/self/`file`; -1 with errno on failure.
int write_proc_self(const char* file, const char* text) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/%s", file);
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t len = std::strlen(text);
  ssize_t n = ::write(fd, text, len);
  int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(len)) {
    errno = n < 0 ? err : EIO;
    return -1;
  }
  return 0;
}

/// fork() without glibc's atfork handlers and malloc locks, which another
/// thread of the parent may have held at clone time.
pid_t raw_fork() {
  return static_cast<pid_t>(::syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0));
}

/// Resets signal dispositions and the mask the parent left, right before exec.
void reset_signals() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    (void)::sigaction(sig, &sa, nullptr);  // EINVAL for the few unsettable ones: nothing to reset
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

/// Identity: one uid and one gid, mapped onto the caller's, written from inside.
ChildStep write_identity_maps(const ChildContext& ctx, ChildFailure& f) {
  return write_single_id_maps(ctx.uid_map, ctx.gid_map, f);
}

/// Waits for `pid` and _exits with its status (128 + a signal): the process that forked the
/// rest of the setup stays outside to pass signals on and the status back.
[[noreturn]] void pass_status_of(pid_t pid) {
  forward_signals_to(pid, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) ::_exit(125);
  }
  ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

/// The subordinate-ID mode: joins the holder's user namespace (its maps are written already)
/// and makes this run's other namespaces there. A PID namespace takes in only the children of
/// the process that unshares it: this process then forks its PID 1, which returns to go on
/// with the setup, and stays outside to pass signals on and the status back.
ChildStep join_subid_namespace(const ChildContext& ctx, ChildFailure& f) {
  const ContainerSpec& spec = *ctx.spec;
  if (::setns(ctx.userns_fd, CLONE_NEWUSER) != 0)
    return step_failed(f, 125, errno, "setns", "user namespace", "the subordinate ID holder's");
  ::close(ctx.userns_fd);
  int flags = CLONE_NEWNS;
  if (spec.pid_namespace) flags |= CLONE_NEWPID;
  if (!spec.hostname.empty()) flags |= CLONE_NEWUTS;
  if (spec.network_none) flags |= CLONE_NEWNET;
  if (spec.ipc_namespace) flags |= CLONE_NEWIPC;
  if (::unshare(flags) != 0) return step_failed(f, 125, errno, "unshare", "mount namespace");
  if (!spec.pid_namespace) return ChildStep::done();
  pid_t pid = raw_fork();
  if (pid < 0) return step_failed(f, 125, errno, "fork", "init");
  if (pid == 0) {
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
      return step_failed(f, 125, errno, "set the parent death signal", "");
    return ChildStep::done();
  }
  ::close(ctx.report_fd);  // the init's copy tells the parent about exec
  pass_status_of(pid);
}

/// The subordinate-ID mode's container user other than root: real IDs, set before exec.
ChildStep switch_ids(const ChildContext& ctx, ChildFailure& f) {
  const ContainerSpec& spec = *ctx.spec;
  if (::setgroups(ctx.group_count, ctx.groups) != 0)
    return step_failed(f, 125, errno, "user", "setgroups");
  if (::setresgid(spec.gid, spec.gid, spec.gid) != 0)
    return step_failed(f, 125, errno, "user", "setresgid", "the group is not in the mapped range");
  if (::setresuid(spec.uid, spec.uid, spec.uid) != 0)
    return step_failed(f, 125, errno, "user", "setresuid", "the user is not in the mapped range");
  return ChildStep::done();
}

/// The workload's last steps: stdin, terminal, signals, fds, exec. Returns only on failure.
ChildStep start_workload(const ChildContext& ctx, ChildFailure& f) {
  take_terminal(ctx.tty_fd);  // before stdin may become /dev/null: tty_fd can be 0
  if (ctx.devnull_fd >= 0 && ::dup2(ctx.devnull_fd, STDIN_FILENO) < 0)
    return step_failed(f, 125, errno, "dup2", "/dev/null");
  // Without CAP_SYS_ADMIN a root workload cannot undo the plan, e.g. remount a
  // read-only volume writable (those mounts were made in its own namespace,
  // so the kernel does not lock them). Docker drops it too.
  if (::prctl(PR_CAPBSET_DROP, CAP_SYS_ADMIN, 0, 0, 0) != 0)
    return step_failed(f, 125, errno, "drop capability", "CAP_SYS_ADMIN");
  // Descriptors the caller left open must not leak into the container.
  (void)::syscall(SYS_close_range, 3U, ~0U,
                  CLOSE_RANGE_CLOEXEC);  // ENOSYS on old kernels: leak is harmless
  keep_across_exec(ctx.spec->kept_fds);  // a launcher's (runtime/launcher.h)
  if (ctx.switch_ids) BERTH_CHILD_CHECK(switch_ids(ctx, f));
  // --ulimit, after the identity switch (a limit may be below what the switch needs) and
  // checked against the caller's before the run began (runtime/rlimits.h).
  if (int err = apply_rlimits(ctx.spec->rlimits); err != 0)
    return step_failed(f, 125, err, "run", "--ulimit");
  // --security-opt no-new-privileges: no setuid bit or file capability raises the workload.
  if (ctx.spec->no_new_privileges && ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    return step_failed(f, 125, errno, "drop capability", "no_new_privs");
  reset_signals();
  return exec_workload(ctx, f);
}

/// PID 1 of a new PID namespace: starts the workload, forwards signals to it, reaps every
/// orphan, and exits with the workload's status. Returns only in the workload's process, on
/// its failure.
ChildStep run_init(const ChildContext& ctx, ChildFailure& f) {
  pid_t pid = raw_fork();
  if (pid < 0) return step_failed(f, 125, errno, "fork", "workload");
  if (pid == 0) return start_workload(ctx, f);
  ::close(ctx.report_fd);  // the workload's copy tells the parent about exec
  forward_signals_to(pid, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (;;) {
    int status;
    pid_t got = ::waitpid(-1, &status, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      ::_exit(125);  // ECHILD before the workload was seen: cannot happen
    }
    if (got != pid) continue;  // an orphan, reaped
    if (WIFEXITED(status)) ::_exit(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) ::_exit(128 + WTERMSIG(status));
  }
}

/// Runs the image's ldconfig over Berth's generated configuration (see
/// ContainerSpec::ld_library_dirs), then binds the cache it wrote over
/// /etc/ld.so.cache for this run. Called after pivot_root, before the workload.
ChildStep update_ld_cache(const ChildContext& ctx, ChildFailure& f) {
  pid_t pid = raw_fork();
  if (pid < 0) return step_failed(f, 125, errno, "fork", "ldconfig");
  if (pid == 0) {
    // Its warnings are no business of the workload's streams; its status says whether it worked.
    int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null_fd >= 0) {
      (void)::dup2(null_fd, STDIN_FILENO);
      (void)::dup2(null_fd, STDOUT_FILENO);
      (void)::dup2(null_fd, STDERR_FILENO);
    }
    reset_signals();
    char* const envp[] = {nullptr};
    ::execve(ctx.ldconfig_argv[0], ctx.ldconfig_argv.data(), envp);
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno == EINTR) continue;
    return step_failed(f, 125, errno, "wait", "ldconfig");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    char detail[128];
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
      std::snprintf(detail, sizeof detail, "could not be executed");
    else if (WIFEXITED(status))
      std::snprintf(detail, sizeof detail, "exited with status %d", WEXITSTATUS(status));
    else
      std::snprintf(detail, sizeof detail, "killed by signal %d", WTERMSIG(status));
    return step_failed(f, 125, 0, "update the loader cache: ldconfig", ctx.ldconfig_argv[0],
                       detail);
  }
  int root = ::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) return step_failed(f, 125, errno, "open", "/");
  BERTH_CHILD_CHECK(apply_mount_plan(*ctx.ld_cache_plan, root, f));
  ::close(root);
  return ChildStep::done();
}

/// A squashfs image's root (ContainerSpec::overlay_scratch): a tmpfs of this namespace's own
/// on the scratch directory, and a kernel overlayfs of the shared read-only FUSE mount under
/// an upper on that tmpfs.
ChildStep mount_overlay_root(const ChildContext& ctx, ChildFailure& f) {
  if (::mount("tmpfs", ctx.overlay_scratch, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700") != 0)
    return step_failed(f, 125, errno, "mount", ctx.overlay_scratch, "tmpfs for the overlay");
  for (const char* dir : {ctx.overlay_upper, ctx.overlay_work, ctx.overlay_root}) {
    if (::mkdir(dir, 0755) != 0) return step_failed(f, 125, errno, "mkdir", dir);
  }
  if (::mount("overlay", ctx.overlay_root, "overlay", 0, ctx.overlay_data) != 0)
    return step_failed(f, 125, errno, "mount", ctx.overlay_root, "overlay over the squashfs image");
  return ChildStep::done();
}

/// Appends `text` to the file at `path` in the root (created when missing).
ChildStep append_in_root(int root_fd, const char* path, const char* text, ChildFailure& f) {
  size_t len = std::strlen(text);
  if (len == 0) return ChildStep::done();
  if (make_path_in_root(root_fd, path, true) != 0 && errno != EEXIST)
    return step_failed(f, 125, errno, "create", path);
  int fd = open_in_root(root_fd, path, O_WRONLY | O_APPEND);
  if (fd < 0 || ::write(fd, text, len) != static_cast<ssize_t>(len))
    return step_failed(f, 125, errno, "write", path);
  ::close(fd);
  return ChildStep::done();
}

/// The container user's /etc/passwd and /etc/group lines, prepared by the parent.
ChildStep add_identity_lines(const ChildContext& ctx, int root_fd, ChildFailure& f) {
  BERTH_CHILD_CHECK(append_in_root(root_fd, "/etc/passwd", ctx.passwd_tail, f));
  BERTH_CHILD_CHECK(append_in_root(root_fd, "/etc/group", ctx.group_tail, f));
  return append_in_root(root_fd, kAptDropIn, ctx.apt_drop_in, f);
}

/// Everything from clone to exec, in order. Returns only on failure (with `f` filled): a
/// successful exec does not return, and the processes that fork the rest (a PID namespace's
/// init, the subordinate-ID mode's outer process) _exit with the status they pass back.
ChildStep set_up_and_exec(const ChildContext& ctx, ChildFailure& f) {
  const ContainerSpec& spec = *ctx.spec;
  // Nothing runs unsupervised: when berth dies (even by SIGKILL) the kernel kills this child,
  // which is the workload itself (the signal survives exec) or the init of a PID namespace,
  // whose death takes the namespace along. A run in place is berth itself: no parent of ours.
  if (!ctx.in_place) {
    if (ctx.report_read_fd >= 0) ::close(ctx.report_read_fd);
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
      return step_failed(f, 125, errno, "set the parent death signal", "");
    // The parent may have died before the prctl took effect. getppid() cannot tell across a
    // PID namespace (it reads 0); the report pipe can: no reader left but the parent's.
    struct pollfd report = {ctx.report_fd, POLLOUT, 0};
    if (::poll(&report, 1, 0) == 1 && (report.revents & POLLERR) != 0) ::_exit(125);
  }
  if (ctx.userns_fd >= 0) {
    BERTH_CHILD_CHECK(join_subid_namespace(ctx, f));
  } else {
    BERTH_CHILD_CHECK(write_identity_maps(ctx, f));
  }
  if (!spec.hostname.empty() && ::sethostname(spec.hostname.data(), spec.hostname.size()) != 0)
    return step_failed(f, 125, errno, "sethostname", spec.hostname.c_str());
  // --network none: only lo, brought up; best effort, a workload without it still has no
  // network, which is what was asked.
  if (spec.network_none) (void)loopback_up();
  // Mounts: nothing propagates back to the host; the root becomes a mount
  // point of its own so that pivot_root accepts it.
  // With an rslave volume, slaves instead: the host's mount events still reach it (the plan
  // makes its other binds private).
  if (::mount(nullptr, "/", nullptr, MS_REC | (ctx.plan->slave_root ? MS_SLAVE : MS_PRIVATE),
              nullptr) != 0)
    return step_failed(f, 125, errno, "make mounts private", "/");
  const char* rootfs = spec.rootfs.c_str();
  if (ctx.overlay_root != nullptr) {
    rootfs = ctx.overlay_root;
    BERTH_CHILD_CHECK(mount_overlay_root(ctx, f));
  } else if (::mount(rootfs, rootfs, nullptr, MS_BIND | MS_REC, nullptr) != 0) {
    return step_failed(f, 125, errno, "bind", rootfs);
  }
  int root_fd = ::open(rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root_fd < 0) return step_failed(f, 125, errno, "open", rootfs);
  if (ctx.overlay_root != nullptr) BERTH_CHILD_CHECK(add_identity_lines(ctx, root_fd, f));
  BERTH_CHILD_CHECK(apply_mount_plan(*ctx.plan, root_fd, f));
  if (ctx.overlay_root != nullptr && !spec.writable_rootfs &&
      make_path_in_root(root_fd, spec.cwd.c_str(), false) != 0 && errno != EEXIST) {
    // A read-only root cannot take the missing working directory later: make it now.
    return step_failed(f, 125, errno, "create working directory", spec.cwd.c_str());
  }
  if (!spec.writable_rootfs && remount_read_only(rootfs) != 0)
    return step_failed(f, 125, errno, "remount read-only", rootfs);
  if (::fchdir(root_fd) != 0) return step_failed(f, 125, errno, "chdir", rootfs);
  // pivot_root(".", ".") stacks the old root on the new one; detaching it
  // leaves only the container's tree.
  if (::syscall(SYS_pivot_root, ".", ".") != 0)
    return step_failed(f, 125, errno, "pivot_root", rootfs);
  if (::umount2(".", MNT_DETACH) != 0) return step_failed(f, 125, errno, "detach old root", "/");
  ::close(root_fd);
  if (!ctx.ldconfig_argv.empty()) BERTH_CHILD_CHECK(update_ld_cache(ctx, f));
  if (::chdir(spec.cwd.c_str()) != 0) {
    // Docker creates a missing WorkingDir; so do we, as the container user.
    if (errno != ENOENT || make_path_in_root(AT_FDCWD, spec.cwd.c_str(), false) != 0 ||
        ::chdir(spec.cwd.c_str()) != 0)
      return step_failed(f, 125, errno, "chdir to working directory", spec.cwd.c_str());
  }
  // After the setup (ldconfig ran unfiltered), before the init of a PID namespace forks: the
  // workload, its children and the init (whose /proc/PID/status tells `berth exec` to install
  // the filter too) keep it. A build without a filter for this architecture runs without
  // (`berth info` says so).
  if (ctx.emulation == RootEmulation::kSeccomp && root_emulation_supported() &&
      install_root_emulation() != 0)
    return step_failed(f, 125, errno, "root emulation", "seccomp filter");
  if (spec.pid_namespace) return run_init(ctx, f);
  return start_workload(ctx, f);
}

}  // namespace

ChildStep write_single_id_maps(const char* uid_map, const char* gid_map, ChildFailure& f) {
  if (write_proc_self("setgroups", "deny") != 0 && errno != ENOENT)
    return step_failed(f, 125, errno, "write", "/proc/self/setgroups");
  if (write_proc_self("uid_map", uid_map) != 0)
    return step_failed(f, 125, errno, "write", "/proc/self/uid_map");
  if (write_proc_self("gid_map", gid_map) != 0)
    return step_failed(f, 125, errno, "write", "/proc/self/gid_map");
  return ChildStep::done();
}

ChildStep exec_workload(const ChildContext& ctx, ChildFailure& f) {
  const char* file = ctx.argv[0];
  char quoted[sizeof f.subject];  // exec: "name": ...
  std::snprintf(quoted, sizeof quoted, "\"%s\"", file);
  if (std::strchr(file, '/') != nullptr) {
    ::execve(file, ctx.argv.data(), ctx.envp.data());
    int err = errno;
    return step_failed(f, err == ENOENT || err == ENOTDIR ? 127 : 126, err, "exec:", quoted);
  }
  size_t flen = std::strlen(file);
  bool denied = false;
  const char* p = ctx.path;
  char buf[PATH_MAX];
  for (;;) {
    const char* colon = std::strchr(p, ':');
    size_t dlen = colon ? static_cast<size_t>(colon - p) : std::strlen(p);
    if (dlen + flen + 2 <= sizeof buf) {
      if (dlen == 0) {
        std::memcpy(buf, file, flen + 1);  // an empty PATH entry is the working directory
      } else {
        // The directory is only the first part of buf: the file name, copied with its NUL
        // two lines down, ends the string, which the check does not follow.
        std::memcpy(buf, p, dlen);  // NOLINT(bugprone-not-null-terminated-result)
        buf[dlen] = '/';
        std::memcpy(buf + dlen + 1, file, flen + 1);
      }
      ::execve(buf, ctx.argv.data(), ctx.envp.data());
      int err = errno;
      if (err == EACCES) {
        denied = true;
      } else if (err != ENOENT && err != ENOTDIR && err != ELOOP && err != ENAMETOOLONG) {
        // Found but cannot run it: ENOEXEC, E2BIG, ...
        return step_failed(f, 126, err, "exec:", quoted);
      }
    }
    if (colon == nullptr) break;
    p = colon + 1;
  }
  if (denied) return step_failed(f, 126, EACCES, "exec:", quoted);
  return step_failed(f, 127, 0, "exec:", quoted, "executable file not found in $PATH");
}

void report_child_failure(int fd, const ChildFailure& f) {
  // A short write leaves the parent with a truncated record, which it reports as such.
  (void)!::write(fd, &f, sizeof f);
  ::_exit(f.exit_code);
}

void child_main(const ChildContext& ctx) {
  ChildFailure f;
  // Returns only on failure, in whichever process of the setup failed: this one, a PID
  // namespace's workload, or the subordinate-ID mode's init.
  (void)set_up_and_exec(ctx, f);
  report_child_failure(ctx.report_fd, f);
}

ChildFailure set_up_and_exec_in_place(const ChildContext& ctx) {
  ChildFailure f;
  (void)set_up_and_exec(ctx, f);  // no PID namespace, no subordinate-ID join: nothing forked
  return f;
}

int foreground_terminal() {
  for (int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO}) {
    if (::isatty(fd) && ::tcgetpgrp(fd) == ::getpgrp()) return fd;
  }
  return -1;
}

void take_terminal(int tty_fd) {
  if (tty_fd < 0) return;
  // SIGTTOU is blocked here (the parent blocked it), so a background group may take it.
  if (::setpgid(0, 0) == 0) {
    (void)::tcsetpgrp(tty_fd, ::getpgrp());  // best effort: the job still runs without it
  }
}

size_t read_child_report(int fd, ChildFailure* failure) {
  size_t got = 0;
  while (got < sizeof *failure) {
    ssize_t n = ::read(fd, reinterpret_cast<char*>(failure) + got, sizeof *failure - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  return got;
}

int wait_child(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

RunOutcome child_outcome(int status, const ChildFailure& failure, size_t got,
                         const std::string& subject) {
  RunOutcome out;
  if (WIFEXITED(status))
    out.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    out.exit_code = 128 + WTERMSIG(status);
  if (got == sizeof failure) {
    ChildFailure c = failure;
    c.subject[sizeof c.subject - 1] = c.detail[sizeof c.detail - 1] = '\0';
    Error e =
        c.detail[0] ? make_error(c.op, c.subject, c.detail) : sys_error(c.op, c.subject, c.err);
    e.sys_errno = c.err;
    if (c.op == Op("root emulation"))  // a kernel without seccomp filters (CONFIG_SECCOMP_FILTER)
      e = std::move(e).with_hint(
          "run with --root-emulation=none (or root_emulation = \"none\" in berth.conf)");
    out.exit_code = c.exit_code;
    out.error = std::move(e);
  } else if (got > 0) {
    out.exit_code = 125;
    out.error = make_error("run", subject, "the container's setup died mid-report");
  }
  return out;
}

}  // namespace berth
