#include "runtime/monitor.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "core/dir.h"
#include "core/json.h"
#include "core/strings.h"

namespace berth {
namespace {

constexpr const char* kMonitorFile = "monitor.json";
/// A monitor killed outright takes its workload along by SIGKILL (PR_SET_PDEATHSIG).
constexpr int kKilledStatus = 128 + 9;

int64_t mtime_ns(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

int64_t now_ns() {
  using std::chrono::system_clock;
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             system_clock::now().time_since_epoch())
      .count();
}

std::string monitor_path(const ContainerStore& cs, const ContainerRecord& c) {
  return path_join(cs.dir(c), kMonitorFile);
}

/// monitor.json, or a discarded value when there is none (or it is unreadable).
nlohmann::json read_monitor(const ContainerStore& cs, const ContainerRecord& c) {
  auto text = read_file(monitor_path(cs, c));
  if (!text.ok()) return nlohmann::json(nlohmann::json::value_t::discarded);
  nlohmann::json j = parse_json_or_discarded(*text);
  if (!j.is_object()) return nlohmann::json(nlohmann::json::value_t::discarded);
  return j;
}

int64_t number(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

}  // namespace

std::string log_path(const ContainerStore& cs, const ContainerRecord& c) {
  return path_join(cs.dir(c), "log");
}

RunTimes run_times(const ContainerStore& cs, const ContainerRecord& c) {
  RunTimes t;
  t.exit_code = c.last_exit;
  struct stat lock_st;
  if (::stat(path_join(cs.dir(c), "run.lock").c_str(), &lock_st) != 0) return t;  // never ran
  int64_t lock_mtime = mtime_ns(lock_st);
  // monitor.json speaks of the last run when it names run.lock as that run left it: a later
  // foreground run rewrote the pid in run.lock, and with it its mtime.
  nlohmann::json m = read_monitor(cs, c);
  bool monitored = !m.is_discarded() && number(m, "lock_mtime_ns") == lock_mtime;
  t.detached = monitored;
  t.started_ns = monitored ? number(m, "started_ns") : lock_mtime;
  if (c.running) {
    t.exit_code.reset();
    return t;
  }
  if (monitored) {
    t.finished_ns = number(m, "finished_ns");
    if (t.finished_ns == 0) {
      t.exit_code = kKilledStatus;  // the monitor was killed: so was its workload
    } else if (auto it = m.find("exit_code"); it != m.end() && it->is_number_integer()) {
      t.exit_code = it->get<int>();
    }
    return t;
  }
  // A foreground run's end rewrote container.json unless nothing in it changed.
  struct stat rec_st;
  if (::stat(path_join(cs.dir(c), "container.json").c_str(), &rec_st) == 0 &&
      mtime_ns(rec_st) >= lock_mtime)
    t.finished_ns = mtime_ns(rec_st);
  return t;
}

Result<bool> detach_monitor(const ContainerStore& cs, const ContainerRecord& c,
                            const FileLock& lock, bool keep_stdin) {
  // Opened here, so that a failure is reported to the caller rather than to the log.
  UniqueFd log = BERTH_TRY(open_file(log_path(cs, c), O_WRONLY | O_CREAT | O_APPEND, 0600));
  UniqueFd null = BERTH_TRY(open_file("/dev/null", O_RDWR));
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) return sys_error("pipe", "monitor");
  UniqueFd ready_r(ready[0]), ready_w(ready[1]);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t first = ::fork();
  if (first < 0) return sys_error("fork", "monitor");
  if (first == 0) {
    // The first child: a new session, then the monitor, which nobody waits for.
    ready_r.reset();
    if (::setsid() < 0) ::_exit(1);
    pid_t monitor = ::fork();
    if (monitor != 0) ::_exit(monitor < 0 ? 1 : 0);
    write_runner_pid(lock);
    if (keep_stdin) {
      // -i: a pipe whose write end the monitor keeps open and never writes, as Docker's
      // attachable stdin: a shell reading it waits rather than exiting at end of file.
      int in[2];
      if (::pipe2(in, O_CLOEXEC) != 0) ::_exit(1);
      ::dup2(in[0], STDIN_FILENO);
      ::close(in[0]);  // in[1] stays open, close-on-exec, for the monitor's life
    } else {
      ::dup2(null.get(), STDIN_FILENO);
    }
    ::dup2(log.get(), STDOUT_FILENO);
    ::dup2(log.get(), STDERR_FILENO);
    struct stat st;
    int64_t lock_mtime = ::fstat(lock.fd(), &st) == 0 ? mtime_ns(st) : 0;
    nlohmann::json m = {{"pid", static_cast<int>(::getpid())},
                        {"lock_mtime_ns", lock_mtime},
                        {"started_ns", now_ns()}};
    // Best effort: without it ps reads the start from run.lock, and the end from the record.
    (void)write_file_atomic(monitor_path(cs, c), to_text(m) + "\n", 0644, Durability::kProcessSafe);
    (void)!::write(ready_w.get(), "1", 1);
    return true;
  }
  ready_w.reset();
  int status = 0;
  while (::waitpid(first, &status, 0) < 0 && errno == EINTR) {
  }
  char byte = 0;
  ssize_t n;
  do {
    n = ::read(ready_r.get(), &byte, 1);
  } while (n < 0 && errno == EINTR);
  if (n != 1)
    return make_error("run", c.names.empty() ? c.id : c.names.front(),
                      "the monitor process did not start");
  return false;
}

void record_monitor_end(const ContainerStore& cs, const ContainerRecord& c, int exit_code) {
  nlohmann::json m = read_monitor(cs, c);
  if (m.is_discarded()) return;  // its start was not recorded: ps reads the record instead
  m["finished_ns"] = now_ns();
  m["exit_code"] = exit_code;
  (void)write_file_atomic(monitor_path(cs, c), to_text(m) + "\n", 0644,
                          Durability::kProcessSafe);  // best effort, as its start
}

pid_t runner_pid(const ContainerStore& cs, const ContainerRecord& c) {
  std::string path = path_join(cs.dir(c), "run.lock");
  auto lock = FileLock::try_acquire(path, FileLock::Mode::kShared);
  if (!lock.ok() || lock->held()) return 0;  // free: nothing runs
  auto text = read_file(path);
  return text.ok() ? static_cast<pid_t>(std::atol(text->c_str())) : 0;
}

pid_t workload_pid(pid_t runner) {
  if (runner <= 0) return 0;
  // The engine's child is the runner's only long-lived child; its children file is the
  // cheapest way to it (CONFIG_PROC_CHILDREN), else every process's parent is read.
  std::string r = std::to_string(runner);
  if (auto text = read_file("/proc/" + r + "/task/" + r + "/children"); text.ok()) {
    if (pid_t p = static_cast<pid_t>(std::atol(text->c_str())); p > 0) return p;
  }
  for (const std::string& e : list_dir("/proc")) {
    if (e.empty() || e.find_first_not_of("0123456789") != std::string::npos) continue;
    auto stat = read_file("/proc/" + e + "/stat");
    if (!stat.ok()) continue;
    // pid (comm) state ppid ...: comm may hold spaces and parentheses, so read after the last ')'.
    size_t close = stat->rfind(')');
    if (close == std::string::npos) continue;
    int ppid = 0;
    char state = 0;
    if (std::sscanf(stat->c_str() + close + 1, " %c %d", &state, &ppid) == 2 && ppid == runner)
      return static_cast<pid_t>(std::atol(e.c_str()));
  }
  return 0;
}

bool wait_stopped(const ContainerStore& cs, const ContainerRecord& c, double timeout_s) {
  using std::chrono::steady_clock;
  auto deadline = steady_clock::now() + std::chrono::duration<double>(timeout_s);
  std::string path = path_join(cs.dir(c), "run.lock");
  for (;;) {
    auto lock = FileLock::try_acquire(path, FileLock::Mode::kShared);
    if (!lock.ok() || lock->held()) return true;  // gone (run --rm) or free
    if (timeout_s >= 0 && steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace berth
