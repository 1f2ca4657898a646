// Running a fallback engine's host process with the workload's signals forwarded.
#include "runtime/spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iterator>

#include "core/fs.h"

namespace berth {
namespace {

constexpr int kForwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

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

}  // namespace berth
