// /proc/PID/stat: the one parser of its text, and a reader of a live process's; and the one
// walk over /proc's processes. The text is
// "PID (COMM) STATE PPID ... STARTTIME ...": COMM is the command name, which may hold spaces
// and parentheses, so only the last ')' ends it (proc(5)). Header-only, with no Berth code
// behind it: the SPANK plugin, which compiles only a few of Berth's sources, reads it too.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

namespace berth {

/// The fields of /proc/PID/stat that Berth reads.
struct ProcStat {
  char state = 0;           ///< field 3: 'R', 'S', 'D', 'T', 'Z' (zombie), 'X' (dead), ...
  int64_t ppid = 0;         ///< field 4: the parent's pid; 0 when missing or not a number
  int64_t tty_nr = 0;       ///< field 7: the controlling terminal's device number; 0 none
  uint64_t utime = 0;       ///< field 14: user CPU time, clock ticks
  uint64_t stime = 0;       ///< field 15: system CPU time, clock ticks
  uint64_t start_time = 0;  ///< field 22: clock ticks after boot; 0 when missing or not a number

  /// Whether the process has ended: a zombie waiting to be reaped, or dead.
  bool gone() const { return state == 'Z' || state == 'X'; }
};

namespace proc_stat_detail {

/// `token` as a whole unsigned decimal number; `fallback` when it is anything else (empty,
/// signed, not digits, too large for T).
template <typename T>
T whole_or(std::string_view token, T fallback) {
  T v = 0;
  auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
  if (token.empty() || token.front() == '-' || ec != std::errc() ||
      end != token.data() + token.size())
    return fallback;
  return v;
}

}  // namespace proc_stat_detail

/// The fields of a /proc/PID/stat text. nullopt when it has no state, that is when there is
/// no ')' or no one-letter field follows it: then it is not a stat text (or an empty one, the
/// process gone). A shorter text than the kernel's (a truncated read, a test's fake /proc) keeps
/// its state: a missing or garbled PPID or STARTTIME reads as 0, a value no process has (pid 0 is
/// the kernel's; every process starts at least one tick after boot), which callers take as
/// "unknown".
inline std::optional<ProcStat> parse_proc_stat(std::string_view text) {
  size_t close = text.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(close + 1);
  ProcStat st;
  // The fields after the name, split at runs of spaces (and the final newline): field 3
  // (the state) is the first of them.
  int field = 2;
  size_t i = 0;
  while (i < rest.size() && field < 22) {
    while (i < rest.size() && (rest[i] == ' ' || rest[i] == '\n')) ++i;
    if (i == rest.size()) break;
    size_t end = rest.find_first_of(" \n", i);
    if (end == std::string_view::npos) end = rest.size();
    std::string_view token = rest.substr(i, end - i);
    switch (++field) {
      case 3:
        st.state = token.size() == 1 ? token[0] : '\0';
        break;
      case 4:
        st.ppid = proc_stat_detail::whole_or<int64_t>(token, 0);
        break;
      case 7:
        st.tty_nr = proc_stat_detail::whole_or<int64_t>(token, 0);
        break;
      case 14:
        st.utime = proc_stat_detail::whole_or<uint64_t>(token, 0);
        break;
      case 15:
        st.stime = proc_stat_detail::whole_or<uint64_t>(token, 0);
        break;
      case 22:
        st.start_time = proc_stat_detail::whole_or<uint64_t>(token, 0);
        break;
      default:
        break;
    }
    i = end;
  }
  if (st.state == '\0') return std::nullopt;
  return st;
}

/// The fields of /proc/PID/stat for a live `pid`; nullopt when it cannot be read (the
/// process is gone and reaped, or /proc hides it). Plain open and read, no Berth code.
inline std::optional<ProcStat> read_proc_stat(pid_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/stat";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  // A stat line is about 300 bytes, up to about 1 KiB with every number at its widest; what
  // does not fit in 4 KiB is past field 22, the last one read.
  char buf[4096];
  size_t n = 0;
  while (n < sizeof buf) {
    ssize_t r = ::read(fd, buf + n, sizeof buf - n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    n += static_cast<size_t>(r);
  }
  ::close(fd);
  return parse_proc_stat(std::string_view(buf, n));
}

/// Calls `fn(pid)` for every process /proc lists, in its order, until `fn` returns true (it
/// found what it looked for). False when /proc cannot be read.
template <typename Fn>
bool for_each_pid(Fn fn) {
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return false;
  while (struct dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || pid <= 0) continue;
    if (fn(static_cast<pid_t>(pid))) break;
  }
  ::closedir(d);
  return true;
}

}  // namespace berth
