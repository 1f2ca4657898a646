// Running a fallback engine's host process with the workload's signals forwarded.
#include "runtime/spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>

#include "core/fs.h"
#include "core/signals.h"
#include "runtime/launcher.h"
#include "runtime/rlimits.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

namespace berth {
namespace {

/// A process that outlives a killed berth; see start_watcher().
struct Watcher {
  pid_t pid = 0;      ///< 0: none
  UniqueFd lifeline;  ///< berth's write end; only berth holds it (close-on-exec)
};

/// Forks a process that outlives a killed berth long enough to end what the engine started
/// beyond its own process (which dies by its parent death signal): the process group `group`
/// (0: none) and `orphan_args` (null-terminated; {nullptr}: none). It waits on its lifeline,
/// a pipe berth writes to when the run ended: end of file means berth died. Between fork and
/// exec it calls only async-signal-safe functions. No watcher when there is nothing to watch.
Watcher start_watcher(pid_t group, const std::vector<char*>& orphan_args) {
  Watcher w;
  if (group == 0 && orphan_args.front() == nullptr) return w;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return w;  // best effort: the run goes on unwatched
  pid_t pid = ::fork();
  if (pid == 0) {
    sigset_t all;  // not the forwarding handlers: the signals are the engine's, not ours
    sigfillset(&all);
    ::sigprocmask(SIG_SETMASK, &all, nullptr);
    ::close(fds[1]);
    char done;
    ssize_t n;
    while ((n = ::read(fds[0], &done, 1)) < 0 && errno == EINTR) {
    }
    if (n != 0) ::_exit(0);
    if (group != 0) (void)::kill(-group, SIGKILL);
    if (orphan_args.front() != nullptr) {
      int null_fd = ::open("/dev/null", O_RDWR);
      for (int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO})
        if (null_fd >= 0) (void)::dup2(null_fd, fd);
      ::execve(orphan_args.front(), orphan_args.data(), environ);
    }
    ::_exit(0);
  }
  ::close(fds[0]);
  if (pid < 0) {
    ::close(fds[1]);
    return w;
  }
  w.pid = pid;
  w.lifeline.reset(fds[1]);
  return w;
}

/// Tells the watcher the run ended, and reaps it.
void stop_watcher(Watcher& w) {
  if (w.pid == 0) return;
  (void)!::write(w.lifeline.get(), "x", 1);
  w.lifeline.reset();
  while (::waitpid(w.pid, nullptr, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

RunOutcome spawn_and_wait(const ContainerSpec& spec, const std::vector<std::string>& argv,
                          const std::vector<std::string>& envp, const std::string& cwd,
                          Forward forward, const std::vector<std::string>& on_orphan,
                          bool contiguous_fds) {
  std::vector<char*> args, envs, orphan_args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const std::string& a : on_orphan) orphan_args.push_back(const_cast<char*>(a.c_str()));
  orphan_args.push_back(nullptr);
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
  add_forwarded_signals(&block);
  ::sigprocmask(SIG_BLOCK, &block, &old_mask);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) {
    // The engine's process dies with berth, even a berth killed by SIGKILL; checked again
    // after the prctl for a parent that died before it.
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || ::getppid() != parent) ::_exit(125);
    reset_forwarded_signals();
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
    // Only the launcher's descriptors reach the engine (and through it the workload): berth's
    // and the caller's others are closed at exec, as the userns engine's child does.
    (void)::syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC);  // ENOSYS: a harmless leak
    keep_across_exec(spec.kept_fds);
    if (contiguous_fds) fill_kept_gaps(spec.kept_fds);
    // --ulimit: the engine (proot, runc, fakechroot's loader) passes its limits on to the
    // workload (runtime/rlimits.h).
    if (int err = apply_rlimits(spec.rlimits); err != 0) {
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
  ForwardedActions old_actions;
  forward_signals_to(own_group ? -pid : pid, &old_actions);  // the child, or its own group
  ::sigprocmask(SIG_UNBLOCK, &block, nullptr);

  report_w.reset();  // before the watcher is forked: its copy would keep the report open
  Watcher watcher = start_watcher(own_group ? pid : 0, orphan_args);
  int exec_err = 0;
  ssize_t n;
  while ((n = ::read(report_r.get(), &exec_err, sizeof exec_err)) < 0 && errno == EINTR) {
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  stop_watcher(watcher);
  stop_forwarding(old_actions);
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  if (n == sizeof exec_err) return RunOutcome{125, sys_error("exec", argv.front(), exec_err)};
  RunOutcome out;
  if (WIFEXITED(status))
    out.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    out.exit_code = 128 + WTERMSIG(status);
  return out;
}

}  // namespace berth
