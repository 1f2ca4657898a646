// sacct as a usage source (gateway/sacct.h).
#include "gateway/sacct.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <ctime>

#include "core/clock.h"
#include "core/scope_guard.h"

extern char** environ;

namespace berth::gateway {
namespace {

/// As sacct's -S and -E take it: RFC 3339 without the zone.
std::string utc(int64_t t) {
  return rfc3339(t).substr(0, 19);
}

/// The first non-empty line of `text`, at most 300 bytes.
std::string first_line(const std::string& text) {
  size_t start = text.find_first_not_of("\r\n");
  if (start == std::string::npos) return "";
  std::string line = text.substr(start, text.find_first_of("\r\n", start) - start);
  return line.size() > 300 ? line.substr(0, 300) + "..." : line;
}

}  // namespace

std::vector<std::string> sacct_args(const AccountingConfig& config, int64_t since, int64_t until) {
  // -E is inclusive and in whole seconds: the window's last second is until - 1.
  return {config.sacct, "--json", "-X", "--allusers", "-S", utc(since), "-E", utc(until - 1)};
}

Result<std::string> run_program(const std::vector<std::string>& argv,
                                const std::map<std::string, std::string>& env, int64_t timeout_s,
                                size_t max_bytes, const ProgramUse& use) {
  const std::string& program = argv.at(0);
  std::map<std::string, std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view kv(*e);
    size_t eq = kv.find('=');
    if (eq != std::string_view::npos) vars[std::string(kv.substr(0, eq))] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : env) vars[k] = v;
  std::vector<std::string> env_text;
  env_text.reserve(vars.size());
  for (const auto& [k, v] : vars) {
    std::string kv = k;
    kv += '=';
    kv += v;
    env_text.push_back(std::move(kv));
  }
  std::vector<char*> envp, args;
  for (std::string& s : env_text) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (std::string& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);

  int out[2] = {-1, -1}, err[2] = {-1, -1};
  if (::pipe2(out, O_CLOEXEC) != 0) return sys_error("pipe", program);
  if (::pipe2(err, O_CLOEXEC) != 0) {
    int saved = errno;
    ::close(out[0]);
    ::close(out[1]);
    return sys_error("pipe", program, saved);
  }
  auto close_read = on_scope_exit([&] {
    ::close(out[0]);
    ::close(err[0]);
  });
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  // The server's threads block SIGTERM and SIGINT (taken by sigwait): the child must not
  // inherit that mask, nor berthd's ignored SIGPIPE.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  int spawned =
      program.find('/') == std::string::npos
          ? ::posix_spawnp(&pid, program.c_str(), &actions, &attr, args.data(), envp.data())
          : ::posix_spawn(&pid, program.c_str(), &actions, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(out[1]);
  ::close(err[1]);
  if (spawned != 0) return sys_error("exec:", "\"" + program + "\"", spawned);

  std::string stdout_text, stderr_text;
  bool too_big = false, timed_out = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  char buf[65536];
  while (fds[0].fd >= 0 || fds[1].fd >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    int n = ::poll(fds, 2, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got <= 0) {
        fds[i].fd = -1;  // EOF (closed by the guard)
        continue;
      }
      std::string& into = i == 0 ? stdout_text : stderr_text;
      const size_t cap = i == 0 ? max_bytes : 65536;  // stderr: its first lines are enough
      into.append(buf, std::min(static_cast<size_t>(got), cap - std::min(cap, into.size())));
      if (i == 0 && into.size() >= max_bytes) too_big = true;
    }
    if (too_big) break;
  }
  if (timed_out || too_big) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out)
    return make_error(use.op, program,
                      "no answer within " + std::to_string(timeout_s) + " s (" +
                          std::string(use.timeout_key) + ")");
  if (too_big)
    return make_error(use.op, program,
                      "the answer is larger than " + std::to_string(max_bytes) + " bytes");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string why = first_line(stderr_text);
    if (why.empty()) why = first_line(stdout_text);
    std::string how = WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                        : "signal " + std::to_string(WTERMSIG(status));
    return make_error(use.op, program, why.empty() ? how : why + " (" + how + ")");
  }
  if (use.stderr_text != nullptr) *use.stderr_text = std::move(stderr_text);
  return stdout_text;
}

Result<std::vector<UsageRecord>> sacct_usage(const AccountingConfig& config, int64_t since,
                                             int64_t until, const ShareUnits& share) {
  std::map<std::string, std::string> env = {{"TZ", "UTC"}};
  if (!config.slurm_conf.empty()) env["SLURM_CONF"] = config.slurm_conf;
  std::string text = BERTH_TRY(
      run_program(sacct_args(config, since, until), env, config.timeout_s, size_t{1} << 30));
  return usage_from_sacct_json(text, share);
}

}  // namespace berth::gateway
