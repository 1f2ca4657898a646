// Keeping berthd's record of a job in step with Slurm: a job's state read from slurmrestd and
// recorded when it changed, and an account's unfinished jobs counted (gateway/jobs.h's
// JobService owns one; the reads, admission and reconciliation share it).
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "core/error.h"
#include "gateway/jobs_db.h"
#include "gateway/slurm_rest.h"

namespace berth::gateway {

/// The database's jobs refreshed from Slurm. Holds no state of its own: safe from the
/// server's threads as the database and the Slurm client are.
class JobSync {
 public:
  JobSync(JobsDb& db, SlurmRest& slurm) : db_(db), slurm_(slurm) {}

  /// Reads the job's state from Slurm as `user` and records it when it changed; nothing for a
  /// job not in Slurm (yet) or final.
  Status refresh(const std::string& user, JobRecord& job);
  /// Records what Slurm says of `job` (`info`) when it changed. Slurm forgets a job's GPUs when
  /// it ends: the ones recorded while it ran stay.
  Status record(JobRecord& job, SlurmJobInfo info);
  /// `user`'s running and queued jobs in the database; with `refresh`, their states are read
  /// from Slurm first (one listing of the account's jobs; Slurm unreachable: the database's
  /// counts).
  Result<std::pair<int64_t, int64_t>> unfinished(const std::string& user, bool refresh);

 private:
  JobsDb& db_;
  SlurmRest& slurm_;
};

}  // namespace berth::gateway
