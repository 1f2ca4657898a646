// berth top CONTAINER: the processes of a running container, as `docker top` shows them (the
// columns of `ps -ef`; the host's PIDs, as Docker's), or as JSON for scripts.
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <map>
#include <set>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/context.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/proc_stat.h"
#include "runtime/monitor.h"

namespace berth::cli {
namespace {

struct TopRow {
  pid_t pid = 0, ppid = 0;
  uid_t uid = 0;
  std::string user, tty, command;
  double cpu_s = 0;     ///< CPU time so far
  int64_t started = 0;  ///< Unix seconds
  int cpu_percent = 0;  ///< of its lifetime, as ps's C
};

/// /proc/stat's btime: when the machine booted, Unix seconds.
int64_t boot_time() {
  auto text = read_file("/proc/stat");
  if (!text.ok()) return 0;
  size_t at = text->find("\nbtime ");
  return at == std::string::npos ? 0 : std::atoll(text->c_str() + at + 7);
}

/// A terminal's name from its device number ("pts/3", "tty1"), "?" for none, as ps writes it.
std::string tty_name(int64_t tty_nr) {
  if (tty_nr == 0) return "?";
  unsigned major = (static_cast<uint64_t>(tty_nr) >> 8) & 0xfff;
  unsigned minor = (tty_nr & 0xff) | ((static_cast<uint64_t>(tty_nr) >> 12) & 0xfff00);
  if (major >= 136 && major <= 143) return "pts/" + std::to_string((major - 136) * 256 + minor);
  if (major == 4) return "tty" + std::to_string(minor);
  return "?";
}

/// The real uid of `pid` (/proc/PID/status "Uid:"); nullopt when unreadable.
std::optional<uid_t> real_uid(pid_t pid) {
  auto text = read_file("/proc/" + std::to_string(pid) + "/status");
  if (!text.ok()) return std::nullopt;
  size_t at = text->find("\nUid:");
  if (at == std::string::npos) return std::nullopt;
  return static_cast<uid_t>(std::strtoul(text->c_str() + at + 5, nullptr, 10));
}

/// /proc/PID/cmdline as one line, arguments separated by spaces; "[COMM]" for a process
/// without one, as ps shows kernel threads and zombies.
std::string command_line(pid_t pid) {
  auto text = read_file("/proc/" + std::to_string(pid) + "/cmdline");
  std::string out = text.ok() ? *text : "";
  while (!out.empty() && out.back() == '\0') out.pop_back();
  std::replace(out.begin(), out.end(), '\0', ' ');
  if (!out.empty()) return out;
  auto comm = read_file("/proc/" + std::to_string(pid) + "/comm");
  std::string name = comm.ok() ? *comm : "";
  while (!name.empty() && name.back() == '\n') name.pop_back();
  return "[" + name + "]";
}

/// `root` and every process below it, by pid.
std::vector<TopRow> process_tree(pid_t root) {
  std::map<pid_t, ProcStat> all;
  for_each_pid([&](pid_t pid) {
    if (auto st = read_proc_stat(pid)) all[pid] = *st;
    return false;
  });
  std::set<pid_t> in{root};
  for (bool grew = true; grew;) {  // parents before children is not /proc's order
    grew = false;
    for (const auto& [pid, st] : all)
      if (!in.contains(pid) && in.contains(static_cast<pid_t>(st.ppid)))
        grew = in.insert(pid).second;
  }
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  const int64_t boot = boot_time(), now = std::time(nullptr);
  std::vector<TopRow> rows;
  for (pid_t pid : in) {
    auto it = all.find(pid);
    if (it == all.end()) continue;  // gone since
    const ProcStat& st = it->second;
    TopRow r;
    r.pid = pid;
    r.ppid = static_cast<pid_t>(st.ppid);
    r.uid = real_uid(pid).value_or(static_cast<uid_t>(-1));
    struct passwd* pw = ::getpwuid(r.uid);
    r.user = pw != nullptr ? pw->pw_name : std::to_string(r.uid);
    r.tty = tty_name(st.tty_nr);
    r.command = command_line(pid);
    r.cpu_s = static_cast<double>(st.utime + st.stime) / ticks;
    r.started = boot + static_cast<int64_t>(static_cast<double>(st.start_time) / ticks);
    const int64_t lived = std::max<int64_t>(1, now - r.started);
    r.cpu_percent = static_cast<int>(r.cpu_s * 100 / static_cast<double>(lived));
    rows.push_back(std::move(r));
  }
  return rows;
}

/// ps's STIME: the time of day for a process started today, else the month and day.
std::string start_text(int64_t started) {
  std::time_t t = started, now = std::time(nullptr);
  std::tm when{}, today{};
  ::localtime_r(&t, &when);
  ::localtime_r(&now, &today);
  char buf[16];
  bool same_day = when.tm_yday == today.tm_yday && when.tm_year == today.tm_year;
  std::strftime(buf, sizeof buf, same_day ? "%H:%M" : "%b%d", &when);
  return buf;
}

/// ps's TIME: the CPU time as [DD-]HH:MM:SS.
std::string cpu_text(double seconds) {
  int64_t s = static_cast<int64_t>(seconds);
  std::string days = s >= 86400 ? std::to_string(s / 86400) + "-" : "";
  return days + fmt::format("{:02}:{:02}:{:02}", (s % 86400) / 3600, (s % 3600) / 60, s % 60);
}

}  // namespace

Action setup_top(CLI::App& app, const GlobalOptions& g) {
  struct Opts {
    std::string name;
    bool json = false;
    std::vector<std::string> ps_options;
  };
  auto o = std::make_shared<Opts>();
  app.add_flag("--json", o->json, "Print the processes as a JSON array");
  app.add_option("CONTAINER", o->name, "Container name or ID")->required();
  app.add_option("PS_OPTIONS", o->ps_options, "(docker top's ps options: not taken)");
  return [o, &g]() -> Status {
    if (!o->ps_options.empty())
      return make_error("top", o->ps_options.front(),
                        "Berth prints ps -ef's columns and takes no ps options")
          .with_hint("berth top --json " + o->name + " gives every field to a script");
    ContainerStore cs = BERTH_TRY(open_containers(g));
    ContainerRecord c = BERTH_TRY(cs.find(o->name));
    pid_t workload = c.running ? workload_pid(runner_pid(cs, c)) : 0;
    if (workload <= 0)
      return make_error("top", o->name, "the container is not running", ErrorCode::kNotFound);
    std::vector<TopRow> rows = process_tree(workload);
    if (o->json) {
      nlohmann::json arr = nlohmann::json::array();
      for (const TopRow& r : rows)
        arr.push_back({{"pid", r.pid},
                       {"ppid", r.ppid},
                       {"uid", r.uid},
                       {"user", r.user},
                       {"tty", r.tty},
                       {"cpu_seconds", r.cpu_s},
                       {"started", r.started},
                       {"command", r.command}});
      std::printf("%s\n", to_text(arr, 2).c_str());
      return {};
    }
    std::printf("%-10s %7s %7s %2s %-5s %-8s %8s %s\n", "UID", "PID", "PPID", "C", "STIME", "TTY",
                "TIME", "CMD");
    for (const TopRow& r : rows)
      std::printf("%-10s %7d %7d %2d %-5s %-8s %8s %s\n", r.user.c_str(), r.pid, r.ppid,
                  r.cpu_percent, start_text(r.started).c_str(), r.tty.c_str(),
                  cpu_text(r.cpu_s).c_str(), r.command.c_str());
    return {};
  };
}

}  // namespace berth::cli
