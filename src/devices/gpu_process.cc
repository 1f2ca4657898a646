#include "devices/gpu_process.h"

#include <pwd.h>

#include <charconv>
#include <vector>

#include "core/fs.h"
#include "core/proc_stat.h"
#include "core/strings.h"

namespace berth {
namespace {

/// A whole decimal number of up to 18 digits, all of `s`.
std::optional<int64_t> whole(std::string_view s) {
  if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string_view::npos)
    return std::nullopt;
  int64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

/// The file's text; nullopt when it cannot be read (gone, hidden, another user's environ).
std::optional<std::string> read_proc(const std::string& path) {
  auto text = read_file(path);
  if (!text.ok()) return std::nullopt;
  return std::move(*text);
}

std::string user_name(uint32_t uid) {
  struct passwd pw {};
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr)
    return pw.pw_name;
  return "";
}

}  // namespace

std::optional<int64_t> slurm_job_of_cgroup(std::string_view text) {
  // v1: "4:memory:/slurm/uid_1000/job_42/step_0/task_0";
  // v2: "0::/system.slice/slurmstepd.scope/job_42/step_batch/user/task_0".
  for (std::string_view line : split_lines(text)) {
    size_t colon = line.find(':');
    colon = colon == std::string_view::npos ? colon : line.find(':', colon + 1);
    if (colon == std::string_view::npos) continue;
    for (std::string_view part : split(line.substr(colon + 1), '/'))
      if (part.starts_with("job_"))
        if (auto id = whole(part.substr(4))) return id;
  }
  return std::nullopt;
}

std::optional<int64_t> slurm_job_of_stepd_title(std::string_view cmdline) {
  // setproctitle pads the title with NULs (or spaces): only its first line counts.
  cmdline = cmdline.substr(0, cmdline.find('\0'));
  constexpr std::string_view kTitle = "slurmstepd: [";
  if (!cmdline.starts_with(kTitle)) return std::nullopt;
  std::string_view rest = cmdline.substr(kTitle.size());
  size_t dot = rest.find('.');
  size_t close = rest.find(']');
  if (dot == std::string_view::npos || close == std::string_view::npos || dot > close)
    return std::nullopt;
  return whole(rest.substr(0, dot));
}

std::optional<int64_t> slurm_job_of_environ(std::string_view text) {
  constexpr std::string_view kName = "SLURM_JOB_ID=";
  for (std::string_view var : split(text, '\0'))
    if (var.starts_with(kName)) return whole(var.substr(kName.size()));
  return std::nullopt;
}

GpuProcessOwner describe_gpu_process(const std::string& proc_root, unsigned pid) {
  GpuProcessOwner o;
  const std::string dir = proc_root + "/" + std::to_string(pid);
  auto status = read_proc(dir + "/status");
  if (!status) return o;
  o.found = true;
  for (std::string_view line : split_lines(*status))
    if (line.starts_with("Uid:")) {
      std::string_view ids = trim(line.substr(4));
      if (auto uid = whole(ids.substr(0, ids.find_first_of(" \t")))) {
        o.uid = static_cast<uint32_t>(*uid);
        o.user = user_name(*o.uid);
      }
    }
  if (auto comm = read_proc(dir + "/comm")) o.command = std::string(trim(*comm));
  auto found = [&o](std::optional<int64_t> id, const char* from) {
    if (!id) return false;
    o.slurm_job_id = id;
    o.slurm_job_from = from;
    return true;
  };
  if (auto cgroup = read_proc(dir + "/cgroup");
      cgroup && found(slurm_job_of_cgroup(*cgroup), "cgroup"))
    return o;
  // The ancestors, nearest first, up to init (a bounded walk: pids may be reused under it).
  std::optional<int64_t> at = pid;
  for (int depth = 0; depth < 64 && at && *at > 1; ++depth) {
    const std::string adir = proc_root + "/" + std::to_string(*at);
    if (depth > 0)
      if (auto cmdline = read_proc(adir + "/cmdline");
          cmdline && found(slurm_job_of_stepd_title(*cmdline), "slurmstepd"))
        return o;
    auto stat = read_proc(adir + "/stat");
    std::optional<ProcStat> st = stat ? parse_proc_stat(*stat) : std::nullopt;
    at = st ? std::optional<int64_t>(st->ppid) : std::nullopt;
  }
  if (auto environ = read_proc(dir + "/environ"))
    (void)found(slurm_job_of_environ(*environ), "environ");
  return o;
}

}  // namespace berth
