// The subordinate-ID mode: the holder process, its pid file, and walks inside its namespace.
#include "runtime/subids.h"

#include <fcntl.h>
#include <linux/nsfs.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "core/env.h"
#include "core/log.h"
#include "core/proc_stat.h"
#include "core/runtime_dir.h"
#include "core/strings.h"
#include "runtime/tool.h"

namespace berth {
namespace {

constexpr const char* kPidFile = "subids.pid";
constexpr const char* kLockFile = "subids.lock";
constexpr const char* kFailedFile = "subids.failed";

std::optional<uint64_t> parse_u64(std::string_view s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

/// The start time of process `pid` (field 22 of /proc/PID/stat, in clock ticks since boot);
/// 0 when it cannot be read or the process has ended (a zombie keeps its user namespace and
/// start time until reaped).
uint64_t start_time(pid_t pid) {
  std::optional<ProcStat> st = read_proc_stat(pid);
  return st && !st->gone() ? st->start_time : 0;
}

/// The pid file's holder: {pid, start time}; {0, 0} when absent or garbled.
std::pair<pid_t, uint64_t> read_pid_file(const std::string& dir) {
  auto text = read_file(path_join(dir, kPidFile));
  if (!text.ok()) return {0, 0};
  auto parts = split(trim(*text), ' ');
  if (parts.size() != 2) return {0, 0};
  auto pid = parse_u64(parts[0]);
  auto start = parse_u64(parts[1]);
  if (!pid || !start || *pid == 0 || *pid > 4194304) return {0, 0};
  return {static_cast<pid_t>(*pid), *start};
}

/// Runs `argv` and waits; its stderr (the helper's own one-line reason) reaches the user's.
Status run_helper(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return sys_error("fork", argv[0]);
  if (pid == 0) {
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return sys_error("wait", argv[0]);
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
  std::string how = WIFEXITED(status) ? "exited with status " + std::to_string(WEXITSTATUS(status))
                                      : "killed by signal " + std::to_string(WTERMSIG(status));
  return make_error("map subordinate IDs", argv[0], how);
}

/// Closes every descriptor from 3 up but `a` and `b`.
void close_all_but(int a, int b) {
  int lo = a < b ? a : b, hi = a < b ? b : a;
  (void)::syscall(SYS_close_range, 3U, static_cast<unsigned>(lo - 1), 0U);  // EINVAL when lo is 3
  (void)::syscall(SYS_close_range, static_cast<unsigned>(lo + 1), static_cast<unsigned>(hi - 1),
                  0U);
  (void)::syscall(SYS_close_range, static_cast<unsigned>(hi + 1), ~0U, 0U);
}

/// What the holder tells its maker once its namespace exists.
struct HolderReport {
  pid_t pid = 0;
  int err = 0;  ///< unshare's errno, 0 when the namespace exists
};

/// The holder's life: a user namespace of its own, a wait for its maps, then sleep forever.
[[noreturn]] void holder_main(int report_fd, int go_fd) {
  close_all_but(report_fd, go_fd);
  int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd >= 0) {
    for (int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO}) (void)::dup2(null_fd, fd);
    if (null_fd > STDERR_FILENO) ::close(null_fd);
  }
  (void)::chdir("/");  // holds no folder busy
  HolderReport r;
  r.pid = ::getpid();
  r.err = ::unshare(CLONE_NEWUSER) == 0 ? 0 : errno;
  (void)!::write(report_fd, &r, sizeof r);
  ::close(report_fd);
  char go = 0;
  ssize_t n;
  while ((n = ::read(go_fd, &go, 1)) < 0 && errno == EINTR) {
  }
  if (r.err != 0 || n != 1) ::_exit(0);  // the maker gave up: nothing to hold
  ::close(go_fd);
  (void)::prctl(PR_SET_NAME, "berth-subids", 0, 0, 0);  // as ps shows it
  // ... and its command line, which is still the run's that forked it (tools that look for a
  // container's processes by command line, the Slurm plugin's tests among them, would take it
  // for one): the argument area, contiguous from argv[0], overwritten in place.
  if (UniqueFd cmd(::open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC)); cmd.valid()) {
    char buf[4096];
    size_t len = 0;
    for (ssize_t n; (n = ::read(cmd.get(), buf, sizeof buf)) > 0;) len += static_cast<size_t>(n);
    constexpr char kTitle[] = "berth-subids";
    if (len >= sizeof kTitle) {
      std::memset(program_invocation_name, 0, len);
      std::memcpy(program_invocation_name, kTitle, sizeof kTitle);
    }
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (;;) ::pause();
}

/// Starts a holder, maps its namespace, records it in `dir`'s pid file. Under the lock.
Status start_holder(const std::string& dir, const SubidSetup& setup) {
  int report[2], go[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return sys_error("pipe", "subordinate ID holder");
  UniqueFd report_r(report[0]), report_w(report[1]);
  if (::pipe2(go, O_CLOEXEC) != 0) return sys_error("pipe", "subordinate ID holder");
  UniqueFd go_r(go[0]), go_w(go[1]);
  // Twice forked, in a session of its own: no terminal's signals, no parent to wait for it.
  pid_t mid = ::fork();
  if (mid < 0) return sys_error("fork", "subordinate ID holder");
  if (mid == 0) {
    (void)::setsid();
    pid_t holder = ::fork();
    if (holder == 0) holder_main(report_w.get(), go_r.get());
    ::_exit(holder < 0 ? 1 : 0);
  }
  report_w.reset();
  go_r.reset();
  int status = 0;
  while (::waitpid(mid, &status, 0) < 0 && errno == EINTR) {
  }
  HolderReport r;
  ssize_t n;
  while ((n = ::read(report_r.get(), &r, sizeof r)) < 0 && errno == EINTR) {
  }
  if (n != static_cast<ssize_t>(sizeof r))
    return make_error("map subordinate IDs", "holder", "the holder process died at its start");
  if (r.err != 0) return sys_error("unshare", "user namespace", r.err);
  // Without the go byte the holder exits when go_w closes; a kill is for one stuck in between.
  auto give_up = [&r](Status st) {
    ::kill(r.pid, SIGKILL);
    return st;
  };
  std::vector<std::string> uid_args = subid_map_args(r.pid, ::geteuid(), setup.uids);
  uid_args.insert(uid_args.begin(), setup.newuidmap);
  if (Status st = run_helper(uid_args); !st.ok()) return give_up(std::move(st));
  std::vector<std::string> gid_args = subid_map_args(r.pid, ::getegid(), setup.gids);
  gid_args.insert(gid_args.begin(), setup.newgidmap);
  if (Status st = run_helper(gid_args); !st.ok()) return give_up(std::move(st));
  uint64_t start = start_time(r.pid);
  if (start == 0) return give_up(sys_error("read", "/proc/" + std::to_string(r.pid) + "/stat"));
  std::string line = std::to_string(r.pid) + " " + std::to_string(start) + "\n";
  if (Status st = write_file_atomic(path_join(dir, kPidFile), line, 0600, Durability::kProcessSafe);
      !st.ok())
    return give_up(std::move(st));
  char byte = 'g';
  if (::write(go_w.get(), &byte, 1) != 1)
    return give_up(sys_error("write", "subordinate ID holder"));
  return {};
}

/// An Error as bytes, for a child to hand to its parent: the Op (this same binary reads it
/// back), the numbers, then subject, detail, hint and each context, NUL-terminated.
std::string serialize(const Error& e) {
  std::string out(reinterpret_cast<const char*>(&e.op), sizeof e.op);
  int nums[3] = {e.sys_errno, e.http_status, static_cast<int>(e.code)};
  out.append(reinterpret_cast<const char*>(nums), sizeof nums);
  for (const std::string* s : {&e.subject, &e.detail, &e.hint}) out.append(*s).push_back('\0');
  for (const std::string& c : e.context) out.append(c).push_back('\0');
  return out;
}

std::optional<Error> deserialize(const std::string& in) {
  Error e;
  int nums[3];
  if (in.size() < sizeof e.op + sizeof nums) return std::nullopt;
  std::memcpy(&e.op, in.data(), sizeof e.op);
  std::memcpy(nums, in.data() + sizeof e.op, sizeof nums);
  e.sys_errno = nums[0];
  e.http_status = nums[1];
  e.code = static_cast<ErrorCode>(nums[2]);
  std::vector<std::string> parts;
  size_t at = sizeof e.op + sizeof nums;
  while (at < in.size()) {
    size_t end = in.find('\0', at);
    if (end == std::string::npos) return std::nullopt;
    parts.push_back(in.substr(at, end - at));
    at = end + 1;
  }
  if (parts.size() < 3) return std::nullopt;
  e.subject = parts[0];
  e.detail = parts[1];
  e.hint = parts[2];
  e.context.assign(parts.begin() + 3, parts.end());
  return e;
}

}  // namespace

std::optional<SubidRange> find_subid_range(std::string_view text, std::string_view name,
                                           unsigned long id) {
  std::string number = std::to_string(id);
  for (std::string_view line : split(text, '\n')) {
    line = trim(line);
    if (line.empty() || line.front() == '#') continue;
    auto f = split(line, ':');
    if (f.size() != 3 || !(f[0] == number || (!name.empty() && f[0] == name))) continue;
    auto start = parse_u64(f[1]);
    auto count = parse_u64(f[2]);
    if (start && count && *count > 0) return SubidRange{*start, *count};
  }
  return std::nullopt;
}

std::vector<std::string> subid_map_args(pid_t pid, unsigned long outer, const SubidRange& r) {
  return {std::to_string(pid),    "0", std::to_string(outer), "1", "1", std::to_string(r.start),
          std::to_string(r.count)};
}

Result<SubidSetup> subid_setup() {
  if (::geteuid() == 0)
    return make_error("map subordinate IDs", "root",
                      "berth runs as root: the container's IDs are the host's already",
                      ErrorCode::kUnsupported);
  SubidSetup s;
  s.newuidmap = BERTH_TRY(find_tool("newuidmap", "BERTH_NEWUIDMAP", "uidmap"));
  s.newgidmap = BERTH_TRY(find_tool("newgidmap", "BERTH_NEWGIDMAP", "uidmap"));
  std::string name;
  // Both files name the owner of a range by user name or uid (not gid).
  auto range = [&name](const char* env, const char* file) -> Result<SubidRange> {
    std::string path = env_or(env, file);
    auto text = read_file(path);
    if (!text.ok() && text.error().code != ErrorCode::kNotFound) return std::move(text).error();
    if (!text.ok() || trim(*text).empty())  // no one has ranges here: no user lookup either
      return make_error("map subordinate IDs", path, "no ranges in it", ErrorCode::kNotFound);
    auto r = find_subid_range(*text, name, ::geteuid());
    if (!r && name.empty()) {
      // Most lines name the user: look the name up only when the number found none.
      struct passwd pw, *found = nullptr;
      char buf[4096];
      if (::getpwuid_r(::geteuid(), &pw, buf, sizeof buf, &found) == 0 && found != nullptr)
        name = found->pw_name;
      r = find_subid_range(*text, name, ::geteuid());
    }
    if (!r)
      return make_error("map subordinate IDs", path,
                        "no range for " + (name.empty() ? std::to_string(::geteuid()) : name),
                        ErrorCode::kNotFound);
    return *r;
  };
  s.uids = BERTH_TRY(range("BERTH_SUBUID", "/etc/subuid"));
  s.gids = BERTH_TRY(range("BERTH_SUBGID", "/etc/subgid"));
  return s;
}

std::string subid_state_path() {
  return runtime_dir_path();
}

Result<std::string> subid_state_dir() {
  return make_runtime_dir("map subordinate IDs");
}

UniqueFd live_subid_namespace(const std::string& dir) {
  auto [pid, start] = read_pid_file(dir);
  if (pid == 0) return {};
  UniqueFd ns(::open(("/proc/" + std::to_string(pid) + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC));
  if (!ns.valid()) return {};
  // Ours: a namespace the user owns, of the process the pid file names (its start time read
  // after the open: a pid reused meanwhile shows another start time).
  uid_t owner = static_cast<uid_t>(-1);
  if (::ioctl(ns.get(), NS_GET_OWNER_UID, &owner) != 0 || owner != ::geteuid()) return {};
  if (start_time(pid) != start) return {};
  return ns;
}

pid_t live_subid_holder(const std::string& dir) {
  if (!live_subid_namespace(dir).valid()) return 0;
  return read_pid_file(dir).first;
}

Result<UniqueFd> subid_namespace(const std::string& dir, const SubidSetup& setup) {
  if (UniqueFd ns = live_subid_namespace(dir); ns.valid()) return ns;
  // Concurrent first runs: one starts the holder, the others find it under the lock.
  FileLock lock = BERTH_TRY(FileLock::acquire(path_join(dir, kLockFile)));
  if (UniqueFd ns = live_subid_namespace(dir); ns.valid()) return ns;
  BERTH_CHECK(start_holder(dir, setup));
  (void)::unlink(path_join(dir, kFailedFile).c_str());  // an earlier failure is over (if any)
  UniqueFd ns = live_subid_namespace(dir);
  if (!ns.valid())
    return make_error("map subordinate IDs", path_join(dir, kPidFile),
                      "the holder process died at its start");
  return ns;
}

std::optional<std::string> subid_start_failure(const std::string& dir) {
  auto text = read_file(path_join(dir, kFailedFile));
  if (!text.ok()) return std::nullopt;
  return std::string(trim(*text));
}

UniqueFd subid_namespace_if_available() {
  if (::geteuid() == 0) return {};
  std::string path = subid_state_path();
  if (UniqueFd ns = live_subid_namespace(path); ns.valid()) return ns;
  // A start that failed here was said once: auto does not run the helpers (and print their
  // complaint) on every run after it.
  if (path_exists(path_join(path, kFailedFile))) return {};
  auto setup = subid_setup();
  if (!setup.ok()) return {};
  auto dir = subid_state_dir();
  auto ns = dir.ok() ? subid_namespace(*dir, *setup) : Result<UniqueFd>(std::move(dir).error());
  if (!ns.ok()) {
    std::string failed = path_join(path, kFailedFile);
    (void)write_file_atomic(failed, ns.error().message() + "\n", 0600,
                            Durability::kProcessSafe)
        .ok();  // best effort: without it the next run tries (and warns) again
    log::warn_once("subids", ns.error().message() + " (runs use the seccomp root emulation until " +
                                 failed + " is removed; --root-emulation=subids tries again)");
    return {};
  }
  return std::move(ns).value();
}

Result<UniqueFd> required_subid_namespace() {
  if (::geteuid() != 0)
    if (UniqueFd ns = live_subid_namespace(subid_state_path()); ns.valid()) return ns;
  SubidSetup setup = BERTH_TRY(subid_setup());
  std::string dir = BERTH_TRY(subid_state_dir());
  return subid_namespace(dir, setup);
}

Status in_subid_namespace(int userns, const std::function<Status()>& fn) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return sys_error("pipe", "subordinate ID namespace");
  UniqueFd r(fds[0]), w(fds[1]);
  pid_t pid = ::fork();
  if (pid < 0) return sys_error("fork", "subordinate ID namespace");
  if (pid == 0) {
    r.reset();
    (void)::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);  // best effort: the walk ends anyway
    Status st;
    if (::setns(userns, CLONE_NEWUSER) != 0) {
      st = sys_error("setns", "subordinate ID namespace");
    } else {
      try {
        st = fn();
      } catch (const std::exception& ex) {
        st = make_error("walk", "", ex.what());
      }
    }
    if (!st.ok()) {
      std::string bytes = serialize(st.error());
      (void)!write_all(w.get(), bytes, "pipe").ok();  // a short record reads as the exit below
    }
    ::_exit(st.ok() ? 0 : 1);
  }
  w.reset();
  auto bytes = read_fd(r.get(), "subordinate ID namespace");
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
  if (bytes.ok())
    if (auto e = deserialize(*bytes)) return *e;
  return make_error("walk", "subordinate ID namespace",
                    WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                        : "the walk's process failed");
}

Status remove_tree_mapped(const std::string& path) {
  Status st = remove_tree(path);
  if (st.ok() || st.error().code != ErrorCode::kPermission) return st;
  UniqueFd ns = subid_namespace_if_available();
  if (!ns.valid()) return st;
  return in_subid_namespace(ns.get(), [&path] { return remove_tree(path); });
}

Status run_mapped(const std::function<Status()>& fn) {
  UniqueFd ns = subid_namespace_if_available();
  if (!ns.valid()) return fn();
  return in_subid_namespace(ns.get(), fn);
}

}  // namespace berth
