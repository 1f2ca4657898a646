// Cloud-class jobs cut at their time limit by berthd itself: Slurm's time limits are whole
// minutes and it checks them every 30 s or so, then waits KillWait, so a cloud job's cap alone
// would let it run up to a minute too long. berthd keeps each running cloud job's deadline
// (Slurm's start time + the walltime its limits gave it) and, within a second of it, cancels
// the job through slurmrestd; the job's record says it was cut at its cap (TIMEOUT). Slurm's
// own time limit stays as the backstop.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <vector>

#include "gateway/job_sync.h"
#include "gateway/jobs_db.h"
#include "gateway/slurm_rest.h"

namespace berth::gateway {

/// The reason berthd records on a job it cut at its cap; Slurm's CANCELLED for such a job is
/// recorded as TIMEOUT (JobSync::record()).
inline constexpr const char* kCutAtCapReason = "cut by berthd at its time limit";

/// How often berthd looks for jobs past their deadline (gateway/berthd/main.cc): a cut lands
/// within this, plus slurmrestd's answer, of the deadline.
inline constexpr int64_t kCapCheckIntervalS = 1;

/// Whether berthd cuts `job` at its time limit itself: a `class: cloud` job with a walltime.
bool cut_at_cap(const JobRecord& job);
/// The Unix time at which berthd cuts `job`: its Slurm start time plus its walltime, for a
/// running cloud job with both; nullopt otherwise (Slurm's start time of a pending job is only
/// an estimate).
std::optional<int64_t> cap_deadline(const JobRecord& job);
/// The ids of `jobs` whose deadline is `now` or earlier.
std::vector<int64_t> jobs_due(const std::vector<JobRecord>& jobs, int64_t now);
/// Whether `job` was cut at its cap, Slurm's word on it being `info`: berthd cut it (its reason
/// says so; Slurm may not have ended it yet), or it is a cloud job Slurm reports CANCELLED at
/// or after its deadline (Slurm's start time plus the job's walltime). The
/// second is read from Slurm's own times, so a refresh that raced the cut, holding a copy of
/// the job from before the cut's reason was written, records the same TIMEOUT as the cut.
bool ended_at_cap(const JobRecord& job, const SlurmJobInfo& info);

/// The running cloud jobs' deadlines kept and acted on, every kCapCheckIntervalS. Used by one
/// thread.
class CapWatch {
 public:
  CapWatch(JobsDb& db, SlurmRest& slurm, JobSync& sync) : db_(db), slurm_(slurm), sync_(sync) {}

  /// Learns the start of berthd's queued and running cloud jobs (one listing of each owner's
  /// Slurm jobs, only for those without a known start) and cancels, as its owner, each one
  /// whose deadline has come. Returns how many were cut.
  int check(int64_t now);

 private:
  JobsDb& db_;
  SlurmRest& slurm_;
  JobSync& sync_;
  std::set<int64_t> cut_;  ///< berthd ids cancelled already (not asked twice)
};

}  // namespace berth::gateway
