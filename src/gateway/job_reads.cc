// The job endpoints' reads (gateway/job_reads.h).
#include "gateway/job_reads.h"

#include <ctime>

#include "gateway/job_request.h"

namespace berth::gateway {

Result<std::optional<JobRecord>> JobReads::get(const Account& who, int64_t id) {
  std::optional<JobRecord> job = BERTH_TRY(db_.get(id));
  if (!job || (job->owner != who.user && !who.admin)) return std::optional<JobRecord>();
  // Slurm unreachable: the database's last word is still the answer.
  (void)sync_.refresh(who.user, *job);  // deliberate: a failed refresh leaves the recorded state
  return job;
}

Result<std::vector<JobRecord>> JobReads::list(const Account& who, const std::string& state,
                                              int64_t since) {
  std::optional<JobState> only = parse_job_state(state);
  if (!state.empty() && !only) return std::vector<JobRecord>{};  // no job is in no state
  return db_.list(who.admin ? "" : who.user, only, since, 1000);
}

Result<std::optional<JobRecord>> JobReads::cancel(const Account& who, int64_t id) {
  std::optional<JobRecord> job = BERTH_TRY(db_.get(id));
  if (!job || (job->owner != who.user && !who.admin)) return std::optional<JobRecord>();
  std::optional<JobLocks::Held> held;
  if (job->slurm_job_id == 0 && job->state == JobState::kAccepted) {
    // Its submission may be in flight (the POST, reconciliation): decided once that is over,
    // on the job as it then is.
    held.emplace(locks_, job->id);
    job = BERTH_TRY(db_.get(id));
    if (!job) return job;
  }
  if (job->slurm_job_id == 0 && job->state == JobState::kAccepted) {
    // Recorded, but slurmrestd did not answer its submission (or berthd died before it heard):
    // Slurm may have it under its comment, and reconciliation would submit it if not. Slurm is
    // asked first: found, the job is cancelled there below; not there, it is CANCELLED here and
    // never submitted (reconciliation submits ACCEPTED jobs only). Slurm not answering is the
    // caller's error, the job as it was: a cancel is never taken on a guess, so that a broker
    // moving the job on leaves no copy behind.
    const int64_t now = std::time(nullptr);
    const std::vector<SlurmJobEntry> listed = BERTH_TRY(slurm_.jobs(job->owner));
    if (const SlurmJobEntry* e = job_with_comment(listed, job_comment(db_.instance(), job->id))) {
      BERTH_CHECK(db_.submitted(job->id, e->id, e->info.state, now));
      job->slurm_job_id = e->id;
      job->state = e->info.state;
    }
    if (job->slurm_job_id == 0) {
      job->state = JobState::kCancelled;
      job->reason = "cancelled before Slurm had it";
      BERTH_CHECK(db_.update(job->id, job->state, job->reason, std::nullopt, "", now));
      return job;
    }
  }
  if (job->slurm_job_id != 0 && !job_state_final(job->state)) {
    // As the caller, never as anyone else: Slurm decides whether an admin may cancel it.
    BERTH_CHECK(slurm_.cancel(who.user, job->slurm_job_id));
    // deliberate: the cancel was accepted; the state follows later
    (void)sync_.refresh(who.user, *job);
  }
  return job;
}

}  // namespace berth::gateway
