#include "slurm/berth_command.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "slurm/spank_plugin.h"

namespace berth::slurm {
namespace {

/// The global option every command is run with: errors as JSON (berth_output.h).
constexpr const char* kJsonErrors = "--error-format=json";

/// `berth ARGS` with `env`, spelled out before a fork: the child allocates nothing.
struct BerthCommand {
  BerthCommand(const std::vector<std::string>& args, const std::vector<std::string>& env) {
    argv_s.push_back(g_state.args.berth);
    argv_s.emplace_back(kJsonErrors);
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    for (auto& a : argv_s) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    // A failed exec is reported as berth would report it: a JSON error object, errno's words
    // (which hold no quote) written between these two.
    std::string message = nlohmann::json("exec: \"" + argv_s[0] + "\": ")
                              .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    message.pop_back();  // the closing quote: errno's words go on inside the string
    exec_failed = "{\"error\":{\"message\":" + message;
  }
  std::vector<std::string> argv_s;
  std::vector<char*> argv, envp;
  std::string exec_failed;  ///< the error object's start, errno's words and kExecFailedEnd follow
};
constexpr const char kExecFailedEnd[] = "\"}}\n";

/// In a forked child: stdin /dev/null, stdout `out` (-1: /dev/null), stderr `err`, nothing else
/// open (a monitor left behind by `run -d` holding the task's output would keep srun waiting
/// for its end), `drop`'s user when given (slurmstepd is root), no signal state left from
/// slurmstepd (berth forwards and waits on its own); then execs `cmd`.
[[noreturn]] void exec_berth(const BerthCommand& cmd, int out, int err, const StepIds* drop) {
  int null = ::open("/dev/null", O_RDWR);
  if (null < 0 || ::dup2(null, 0) < 0 || ::dup2(out >= 0 ? out : null, 1) < 0 || ::dup2(err, 2) < 0)
    _exit(127);
  (void)::syscall(SYS_close_range, 3U, ~0U, 0U);  // ENOSYS: a harmless leak
  if (drop != nullptr) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(drop->gid) != 0 || ::setuid(drop->uid) != 0)
      _exit(126);
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(cmd.argv[0], cmd.argv.data(), cmd.envp.data());
  const char* why = std::strerror(errno);
  (void)!::write(2, cmd.exec_failed.data(), cmd.exec_failed.size());
  (void)!::write(2, why, std::strlen(why));
  (void)!::write(2, kExecFailedEnd, sizeof kExecFailedEnd - 1);
  _exit(127);
}

/// Closes every descriptor from 3 on but `keep` (in a forked child).
void close_all_but(int keep) {
  if (keep > 3) (void)::syscall(SYS_close_range, 3U, static_cast<unsigned>(keep - 1), 0U);
  (void)::syscall(SYS_close_range, static_cast<unsigned>(keep + 1), ~0U, 0U);
}

}  // namespace

Problem Ran::problem() const {
  BerthError e = error();
  if (!e.message.empty()) return e.message;
  if (status < 0) return "berth did not finish";
  if (status > 128) return "berth was killed by signal " + std::to_string(status - 128);
  return "berth exited with status " + std::to_string(status);
}

int output_file(const char* name) {
  int fd = ::memfd_create(name, MFD_CLOEXEC);
  if (fd < 0 || fd > 2) return fd;
  int high = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  ::close(fd);
  return high;
}

int high_pipe(int fds[2]) {
  if (::pipe2(fds, O_CLOEXEC) != 0) return -1;
  for (int i = 0; i < 2; ++i) {
    if (fds[i] > 2) continue;
    int high = ::fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
    ::close(fds[i]);
    fds[i] = high;
  }
  return fds[0] >= 0 && fds[1] >= 0 ? 0 : -1;
}

std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  ::lseek(fd, 0, SEEK_SET);
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

Ran run_berth(const std::vector<std::string>& args, const std::vector<std::string>& env,
              const StepIds* drop, int* keep_err) {
  Ran r;
  int out = output_file("berth-out");
  int err = output_file("berth-err");
  if (out < 0 || err < 0) {
    r.err = "memfd_create: " + errno_text(errno);
    if (out >= 0) ::close(out);
    if (err >= 0) ::close(err);
    return r;
  }
  BerthCommand cmd(args, env);
  pid_t pid = ::fork();
  if (pid == 0) exec_berth(cmd, out, err, drop);
  if (pid > 0) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  } else {
    r.err = "fork: " + errno_text(errno) + "\n";
  }
  r.out = read_all(out);
  r.err += read_all(err);
  ::close(out);
  if (keep_err != nullptr) {
    *keep_err = err;
  } else {
    ::close(err);
  }
  return r;
}

long spawn_detached(const std::vector<std::string>& args, const std::vector<std::string>& env,
                    const StepIds* drop, int err_fd, int status_fd, int out_fd) {
  int pids[2];
  if (high_pipe(pids) != 0) return 0;
  BerthCommand cmd(args, env);
  pid_t child = ::fork();
  if (child == 0) {
    ::setsid();
    pid_t grandchild = ::fork();
    if (grandchild != 0) _exit(grandchild > 0 ? 0 : 1);
    if (status_fd < 0) {
      long me = ::getpid();
      (void)!::write(pids[1], &me, sizeof me);
      exec_berth(cmd, out_fd, err_fd, drop);
    }
    // The waiter: berth's parent, which hands its exit status on and holds nothing else of
    // the caller's (the step's I/O among it) meanwhile.
    pid_t berth = ::fork();
    if (berth == 0) exec_berth(cmd, out_fd, err_fd, drop);
    long pid = berth > 0 ? berth : 0;
    (void)!::write(pids[1], &pid, sizeof pid);
    close_all_but(status_fd);
    int status = 0;
    while (berth > 0 && ::waitpid(berth, &status, 0) < 0 && errno == EINTR) {
    }
    int code = berth <= 0 ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    (void)!::write(status_fd, &code, sizeof code);
    _exit(0);
  }
  ::close(pids[1]);
  long pid = 0;
  if (child > 0) {
    while (::waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
    }
    if (::read(pids[0], &pid, sizeof pid) != static_cast<ssize_t>(sizeof pid)) pid = 0;
  }
  ::close(pids[0]);
  return pid;
}

Ran run_berth_detached(const std::vector<std::string>& args, const std::vector<std::string>& env,
                       const StepIds* drop, int seconds) {
  Ran r;
  int err = output_file("berth-err");
  int status[2] = {-1, -1};
  if (err < 0 || high_pipe(status) != 0) {
    r.err = "memfd_create: " + errno_text(errno) + "\n";
    if (err >= 0) ::close(err);
    return r;
  }
  long pid = spawn_detached(args, env, drop, err, status[1]);
  ::close(status[1]);
  if (pid <= 0) {
    r.err = "fork: " + errno_text(errno) + "\n";
  } else {
    using Clock = std::chrono::steady_clock;
    auto deadline = Clock::now() + std::chrono::seconds(seconds);
    int code = -1;
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      struct pollfd p = {status[0], POLLIN, 0};
      int n = ::poll(&p, 1, static_cast<int>(std::max<long>(0, left.count())));
      if (n < 0 && errno == EINTR) continue;
      if (n > 0 && ::read(status[0], &code, sizeof code) != static_cast<ssize_t>(sizeof code))
        code = -1;
      break;
    }
    r.status = code;
    r.err = read_all(err);
    if (code < 0 && r.error().message.empty())
      r.err +=
          "berth " + args.front() + " did not finish within " + std::to_string(seconds) + " s\n";
  }
  ::close(status[0]);
  ::close(err);
  return r;
}

Problem inspect_container(const std::string& name, const std::vector<std::string>& env,
                          ContainerFacts* out, bool* absent) {
  if (absent != nullptr) *absent = false;
  Ran r = run_berth({"inspect", "--type=container", "--", name}, env, nullptr);
  if (r.status == 0) return parse_container(r.out, out);
  if (absent != nullptr && r.error().code == "not_found") {
    *absent = true;
    return {};
  }
  return r.problem();
}

}  // namespace berth::slurm
