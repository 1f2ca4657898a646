// Reconciliation: berthd's database settled with Slurm, before serving and then periodically
// (gateway/berthd/main.cc). Jobs a crash left ACCEPTED are found in Slurm by their comment or
// submitted; every submitted, unfinished job's state is read; with [slurm] reclaim, the running
// GPU jobs' samples are judged for idle GPUs (gateway/reclaim.h) and orphan processes
// (gateway/orphans.h).
#pragma once

#include <cstdint>

#include "gateway/admission.h"
#include "gateway/job_locks.h"
#include "gateway/job_sync.h"
#include "gateway/jobs_db.h"
#include "gateway/orphans.h"
#include "gateway/reclaim.h"
#include "gateway/slurm_rest.h"

namespace berth::gateway {

/// What one reconciliation did.
struct Reconciled {
  int found = 0;        ///< ACCEPTED jobs Slurm had after all (found by their comment)
  int resubmitted = 0;  ///< ACCEPTED jobs Slurm never got, submitted now
  int failed = 0;       ///< ACCEPTED jobs left for the next round (slurmrestd unreachable)
  int refreshed = 0;    ///< submitted, unfinished jobs whose state was read from Slurm
};

/// Settles the database with Slurm, acting as each job's owner.
class Reconciler {
 public:
  /// `reclaim`: [slurm] reclaim (the GPU jobs' samples are read only then).
  Reconciler(JobsDb& db, SlurmRest& slurm, JobSync& sync, JobLocks& locks,
             const Admission& admission, IdleReclaim& idle, OrphanWatch& orphans, bool reclaim)
      : db_(db),
        slurm_(slurm),
        sync_(sync),
        locks_(locks),
        admission_(admission),
        idle_(idle),
        orphans_(orphans),
        reclaim_(reclaim) {}

  /// Every ACCEPTED job at least `min_age_s` old (so never one whose submission is in flight)
  /// is looked for in Slurm by its comment and recorded, or submitted (as admitted then: its
  /// walltime and GPU share's GRES) when Slurm does not have it; then every submitted,
  /// unfinished job's state is read. Run before serving with min_age_s 0, then periodically.
  /// Each ACCEPTED job is settled under its JobLocks lock, as it is then (a cancel may have
  /// settled it meanwhile).
  /// A database write that fails (a full disk) is dropped: the next round tries again.
  Reconciled reconcile(int64_t now, int64_t min_age_s);

 private:
  JobsDb& db_;
  SlurmRest& slurm_;
  JobSync& sync_;
  JobLocks& locks_;  ///< held while an ACCEPTED job is found or submitted
  const Admission& admission_;
  IdleReclaim& idle_;
  OrphanWatch& orphans_;
  bool reclaim_;
};

}  // namespace berth::gateway
