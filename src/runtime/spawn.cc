// Running a fallback engine's host process with the workload's signals forwarded.
#include "runtime/spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>

#include "core/fs.h"
#include "core/signals.h"

namespace berth {

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
  add_forwarded_signals(&block);
  ::sigprocmask(SIG_BLOCK, &block, &old_mask);
  pid_t pid = ::fork();
  if (pid == 0) {
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

  report_w.reset();
  int exec_err = 0;
  ssize_t n;
  while ((n = ::read(report_r.get(), &exec_err, sizeof exec_err)) < 0 && errno == EINTR) {
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  stop_forwarding(old_actions);
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  if (n == sizeof exec_err) return RunOutcome{125, sys_error("exec", argv.front(), exec_err)};
  RunOutcome out;
  if (WIFEXITED(status)) out.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) out.exit_code = 128 + WTERMSIG(status);
  return out;
}

}  // namespace berth
