// Who a GPU's compute process is: its owner, its command, and the Slurm job it belongs to,
// read from /proc as any user may read it (what `berth gpu stats --json` adds to NVML's pid,
// docs/gpu.md; berthd finds orphan GPU processes with it, gateway/orphans.h).
//
// The Slurm job, first found wins:
//   1. "cgroup": a `job_N` component of /proc/PID/cgroup, which Slurm's cgroup plugins
//      (proctrack/cgroup, task/cgroup; cgroup v1 and v2) put every process of a job under;
//   2. "slurmstepd": an ancestor whose title is slurmstepd's, "slurmstepd: [N.STEP]" (every
//      process Slurm starts descends from its step's slurmstepd until it leaves it, as a
//      daemon does; this is what proctrack/linuxproc itself tracks);
//   3. "environ": SLURM_JOB_ID in /proc/PID/environ, readable for one's own processes (and
//      root's): the job a process left, which may have ended since.
// A /proc entry that is gone (the process ended) or hidden (hidepid) leaves everything unknown.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace berth {

/// What /proc says of one process.
struct GpuProcessOwner {
  bool found = false;                   ///< its /proc entry could be read
  std::optional<uint32_t> uid;          ///< real uid ("Uid:" of /proc/PID/status)
  std::string user;                     ///< the uid's account name; "" when unknown
  std::string command;                  ///< /proc/PID/comm; "" when unknown
  std::optional<int64_t> slurm_job_id;  ///< nullopt: attributed to no Slurm job
  std::string slurm_job_from;           ///< "cgroup", "slurmstepd", "environ"; "" with no job
};

/// The job id of the first `job_N` path component in a /proc/PID/cgroup text.
std::optional<int64_t> slurm_job_of_cgroup(std::string_view text);
/// The job id of a slurmstepd process title ("slurmstepd: [123.batch]", "[123.0]",
/// "[123.extern]", "[123.interactive]"), as /proc/PID/cmdline holds it; nullopt for anything else.
std::optional<int64_t> slurm_job_of_stepd_title(std::string_view cmdline);
/// SLURM_JOB_ID of a /proc/PID/environ text (NUL-separated NAME=VALUE).
std::optional<int64_t> slurm_job_of_environ(std::string_view text);

/// Reads `proc_root`/PID (`proc_root` "/proc" on a host; a fabricated tree in tests) and the
/// account database for the uid's name.
GpuProcessOwner describe_gpu_process(const std::string& proc_root, unsigned pid);

}  // namespace berth
