// Orphan GPU processes (issue 17): processes on a node's GPUs that belong to no running job,
// such as a daemon a finished job left behind, or work started outside Slurm. Found with the
// samples of idle-GPU reclaim (gateway/reclaim.h): NVML lists every process of a GPU, so a
// running GPU job's sampler sees, with its own processes, any other process on the GPUs that
// job holds, and `berth gpu stats` attributes each to its Slurm job (devices/gpu_process.h).
// berthd reads those samples at each reconciliation and reports, never kills: it runs as an
// ordinary account and cannot signal another user's processes.
//
// GPUs that no running GPU job holds are sampled by nobody: processes on them are not seen.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/reclaim.h"

namespace berth::gateway {

/// What a process seen on a GPU of Slurm job `holder` is.
enum class GpuProcessVerdict {
  kHolders,  ///< attributed to `holder` itself
  kRunning,  ///< attributed to another job that is running (not an orphan)
  kOrphan,   ///< attributed to no Slurm job, or to one that is not running
  kUnknown,  ///< not decided: its /proc entry was unreadable, or Slurm could not be asked
};

/// Classifies `p`, seen on a GPU of Slurm job `holder`. `running(K)` says whether Slurm job K
/// is running (true), is not (false: ended, or unknown to Slurm), or cannot be asked (nullopt).
GpuProcessVerdict classify_gpu_process(const SampledProcess& p, int64_t holder,
                                       const std::function<std::optional<bool>(int64_t)>& running);

/// An orphan as berthd reports it.
struct GpuOrphan {
  SampledProcess process;
  int64_t seen_by = 0;                    ///< the berthd job whose samples showed it
  int64_t seen_by_slurm_job = 0;          ///< and that job's Slurm id
  std::string reason;                     ///< "no Slurm job", "Slurm job 42 is not running"
  int64_t first_seen = 0, last_seen = 0;  ///< Unix seconds (berthd's clock)
};

/// An orphan as GET /v1/orphans and the audit log show it (docs/api.md): {"node", "gpu_index",
/// "gpu_uuid", "pid", "uid", "user", "command", "slurm_job_id", "slurm_job_from", "reason",
/// "first_seen", "last_seen", "seen_by": {"id", "slurm_job_id"}}.
nlohmann::json orphan_json(const GpuOrphan& o);

/// The orphans of the last reconciliations, by node, GPU and pid.
class OrphanTracker {
 public:
  /// One reconciliation's findings: `seen`, the orphans in the newest samples of the jobs in
  /// `inspected` (the running GPU jobs whose samples were read). An orphan seen before keeps
  /// its first_seen; one its job no longer shows is dropped, as are those of jobs in neither
  /// `inspected` nor `running` (berthd ids of the running GPU jobs). The orphans seen for the
  /// first time are returned (for the audit log).
  std::vector<GpuOrphan> update(std::vector<GpuOrphan> seen, const std::set<int64_t>& inspected,
                                const std::set<int64_t>& running, int64_t now);
  /// Every current orphan, by node, GPU and pid.
  std::vector<GpuOrphan> list() const;
  /// How many orphans each node has; a node that had some once stays, with 0.
  std::map<std::string, int> count_by_node() const;

 private:
  using Key = std::tuple<std::string, std::string, unsigned>;  ///< node, GPU uuid, pid
  std::map<Key, GpuOrphan> orphans_;
  std::set<std::string> nodes_;
};

/// Orphan GPU processes found at work: each reconciliation judges the processes in the running
/// GPU jobs' samples (check()) and keeps those that belong to no running job. Shared by the
/// server's threads (GET /v1/orphans, /metrics).
class OrphanWatch {
 public:
  explicit OrphanWatch(SlurmRest& slurm) : slurm_(slurm) {}

  /// Told of each orphan GPU process when it is first seen (for the audit log). Set before
  /// serving.
  using Observer = std::function<void(const GpuOrphan& orphan)>;
  void set_observer(Observer o) { observer_ = std::move(o); }
  /// One reconciliation's look: the processes in the samples of `sampled` (the running GPU
  /// jobs in `inspected`, among all those in `running_gpu_jobs`), judged against `unfinished`
  /// (the state of each of berthd's unfinished jobs, by Slurm id) and, for other jobs, Slurm
  /// (one listing per owner, made only when needed; unreachable: nothing decided this round).
  void check(const std::vector<std::pair<JobRecord, GpuSample>>& sampled,
             const std::set<int64_t>& inspected, const std::set<int64_t>& running_gpu_jobs,
             const std::map<int64_t, JobState>& unfinished, int64_t now);
  /// Every current orphan, by node, GPU and pid.
  std::vector<GpuOrphan> list() const;
  /// How many orphans each node has (OrphanTracker::count_by_node()).
  std::map<std::string, int> count_by_node() const;

 private:
  SlurmRest& slurm_;
  mutable std::mutex mu_;
  OrphanTracker orphans_;
  Observer observer_;
};

}  // namespace berth::gateway
