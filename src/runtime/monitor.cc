#include "runtime/monitor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/close_range.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/dir.h"
#include "core/json.h"
#include "core/proc_stat.h"
#include "core/strings.h"
#include "runtime/session_kill.h"

namespace berth {
namespace {

constexpr const char* kMonitorFile = "monitor.json";
/// A monitor killed outright takes its workload along by SIGKILL (PR_SET_PDEATHSIG).
constexpr int kKilledStatus = 128 + 9;

/// In the monitor: its logger, which must outlive the workload to copy the last output.
pid_t g_logger = 0;

/// SIGKILLs every process of the monitor's session but itself and its logger: what the
/// workload left running (a shell's background job, a daemon it started). The session is the
/// container's alone (detach_monitor made it), so these are the container's processes; a
/// process that made a session of its own escapes, as from any runtime without a PID namespace
/// (`--pid-ns` contains everything).
void end_session_leftovers() {
  const pid_t self = ::getpid();
  kill_session(::getsid(0), [self](pid_t pid) { return pid == self || pid == g_logger; });
}

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

/// A detached run's log starts with this line; a log without it (Berth before the streams
/// were kept apart) is one stream of raw bytes.
constexpr std::string_view kLogMagic = "berth-log 1\n";

/// Each piece of output, as it came: a header, then `length` bytes.
struct LogHeader {
  uint8_t stream;  ///< 1 stdout, 2 stderr
  uint8_t zero[3];
  uint32_t length;
  int64_t time_ns;  ///< when the logger read it (Unix ns)
};
static_assert(sizeof(LogHeader) == 16);

/// The logger, a process of its own beside the monitor: copies what arrives on the workload's
/// stdout and stderr pipes into the log, a record per read, until both are closed (the
/// workload and the monitor gone). Not the monitor's child: `exec` and `kill` find the
/// workload as the monitor's only one.
[[noreturn]] void run_logger(int out_r, int err_r, int log_fd, int null_fd) {
  // Only these stay open: the run lock's must not outlive the monitor here, nor the caller's
  // stdout and stderr (whoever reads them would wait for this process to end).
  // Moved out of the way first: any of them may sit where another is going.
  int keep[] = {::fcntl(out_r, F_DUPFD, 100), ::fcntl(err_r, F_DUPFD, 100),
                ::fcntl(log_fd, F_DUPFD, 100), ::fcntl(null_fd, F_DUPFD, 100)};
  for (int fd : keep)
    if (fd < 0) ::_exit(1);
  for (int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO})
    if (::dup2(keep[3], fd) < 0) ::_exit(1);
  if (::dup2(keep[0], 3) < 0 || ::dup2(keep[1], 4) < 0 || ::dup2(keep[2], 5) < 0) ::_exit(1);
  (void)::syscall(SYS_close_range, 6U, ~0U, 0U);
  pollfd fds[2] = {{3, POLLIN, 0}, {4, POLLIN, 0}};
  int open_streams = 2;
  char buf[65536];
  while (open_streams > 0) {
    int n = ::poll(fds, 2, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) ::_exit(1);
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {  // closed by every writer (or broken): this stream is over
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_streams;
        continue;
      }
      LogHeader h{};
      h.stream = static_cast<uint8_t>(i + 1);
      h.length = static_cast<uint32_t>(got);
      h.time_ns = now_ns();
      iovec iov[2] = {{&h, sizeof h}, {buf, static_cast<size_t>(got)}};
      // One write per record, appended: a reader never sees records interleave.
      (void)!::writev(5, iov, 2);
    }
  }
  ::_exit(0);
}

}  // namespace

void LogReader::feed(std::string_view more, bool whole, const LogSink& sink) {
  pending_.append(more);
  if (format_ == Format::kUnknown) {
    if (pending_.starts_with(kLogMagic)) {
      format_ = Format::kRecords;
      pending_.erase(0, kLogMagic.size());
    } else if (!whole && kLogMagic.starts_with(pending_)) {
      return;  // so short that the first line may still come
    } else {
      format_ = Format::kRaw;  // a log of an older Berth: one stream
    }
  }
  if (format_ == Format::kRaw) {
    if (!pending_.empty()) sink(1, 0, pending_);
    pending_.clear();
    return;
  }
  size_t at = 0;
  while (pending_.size() - at >= sizeof(LogHeader)) {
    LogHeader h;
    std::memcpy(&h, pending_.data() + at, sizeof h);
    bool sane =
        (h.stream == 1 || h.stream == 2) && h.zero[0] == 0 && h.zero[1] == 0 && h.zero[2] == 0;
    if (!sane) {  // damaged: the rest is shown as it is rather than lost
      format_ = Format::kRaw;
      pending_.erase(0, at);
      sink(1, 0, pending_);
      pending_.clear();
      return;
    }
    if (pending_.size() - at - sizeof h < h.length) break;  // a record still being written
    sink(h.stream, h.time_ns, std::string_view(pending_).substr(at + sizeof h, h.length));
    at += sizeof h + h.length;
  }
  pending_.erase(0, at);
  if (whole && !pending_.empty()) {  // cut short for good (a full disk): what there is of it
    if (pending_.size() > sizeof(LogHeader))
      sink(pending_[0] == 2 ? 2 : 1, 0, std::string_view(pending_).substr(sizeof(LogHeader)));
    pending_.clear();
  }
}

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
    t.error = string_field(m, "error");
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
  struct stat log_st;
  if (::fstat(log.get(), &log_st) == 0 && log_st.st_size == 0 &&
      ::write(log.get(), kLogMagic.data(), kLogMagic.size()) !=
          static_cast<ssize_t>(kLogMagic.size()))
    return sys_error("write", log_path(cs, c));
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
    // The workload's stdout and stderr go through the logger, which keeps them apart.
    int out[2], err[2];
    if (::pipe(out) != 0 || ::pipe(err) != 0) ::_exit(1);
    pid_t logger = ::fork();
    if (logger < 0) ::_exit(1);
    if (logger == 0) {
      ::close(out[1]);
      ::close(err[1]);
      run_logger(out[0], err[0], log.get(), null.get());
    }
    g_logger = logger;
    pid_t monitor = ::fork();
    if (monitor != 0) ::_exit(monitor < 0 ? 1 : 0);
    ::close(out[0]);
    ::close(err[0]);
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
    if (::dup2(out[1], STDOUT_FILENO) < 0 || ::dup2(err[1], STDERR_FILENO) < 0) ::_exit(1);
    ::close(out[1]);
    ::close(err[1]);
    log.reset();  // the logger writes it
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

void record_monitor_end(const ContainerStore& cs, const ContainerRecord& c, int exit_code,
                        const std::string& error) {
  end_session_leftovers();
  nlohmann::json m = read_monitor(cs, c);
  if (m.is_discarded()) return;  // its start was not recorded: ps reads the record instead
  m["finished_ns"] = now_ns();
  m["exit_code"] = exit_code;
  if (!error.empty()) m["error"] = error;
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
  pid_t child = 0;
  for_each_pid([&](pid_t pid) {
    std::optional<ProcStat> st = read_proc_stat(pid);
    if (st && st->ppid == runner) child = pid;
    return child != 0;
  });
  return child;
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
