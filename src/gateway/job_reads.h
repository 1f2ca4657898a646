// The job endpoints' reads: one job, a list of them, and a cancel, each as the caller may see
// them, refreshed from Slurm (gateway/job_sync.h) where the job is not final.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "gateway/auth.h"
#include "gateway/job_locks.h"
#include "gateway/job_sync.h"
#include "gateway/jobs_db.h"
#include "gateway/slurm_rest.h"

namespace berth::gateway {

/// GET /v1/jobs, GET and DELETE /v1/jobs/{id}. A job is visible to its owner and to
/// administrators; to anyone else it is as absent as a job that never was (nullopt).
class JobReads {
 public:
  JobReads(JobsDb& db, SlurmRest& slurm, JobSync& sync, JobLocks& locks)
      : db_(db), slurm_(slurm), sync_(sync), locks_(locks) {}

  /// The job `id` if `who` may see it, refreshed from Slurm when not final (Slurm
  /// unreachable: as recorded).
  Result<std::optional<JobRecord>> get(const Account& who, int64_t id);
  /// `who`'s jobs (all jobs for an admin), newest first; only those in the state named `state`
  /// unless it is "" (none for a word that names no state).
  Result<std::vector<JobRecord>> list(const Account& who, const std::string& state, int64_t since);
  /// Cancels job `id` as `who` (Slurm decides whether an admin may); nullopt when `who` may
  /// not see it. A job not known to be in Slurm (ACCEPTED) is looked for there by its comment
  /// first: not there, it is CANCELLED and never submitted; Slurm not answering, an error.
  Result<std::optional<JobRecord>> cancel(const Account& who, int64_t id);

 private:
  JobsDb& db_;
  SlurmRest& slurm_;
  JobSync& sync_;
  JobLocks& locks_;  ///< held while an ACCEPTED job's cancel decides
};

}  // namespace berth::gateway
