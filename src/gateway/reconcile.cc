// Reconciliation (gateway/reconcile.h).
#include "gateway/reconcile.h"

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gateway/job_request.h"

namespace berth::gateway {

Reconciled Reconciler::reconcile(int64_t now, int64_t min_age_s) {
  // A database write that fails here (the disk is full) is deliberately dropped: the job keeps
  // its recorded state and the next round tries again.
  Reconciled r;
  auto accepted = db_.list("", JobState::kAccepted, 0, 100000);
  std::map<std::string, std::vector<SlurmJobEntry>> slurm_jobs;  // by owner, read once
  for (const JobRecord& row : accepted.ok() ? *accepted : std::vector<JobRecord>{}) {
    if (now - row.created_at < min_age_s) continue;
    const JobLocks::Held held(locks_, row.id);
    auto current = db_.get(row.id);  // as it is now that no one else settles it
    if (!current.ok() || !*current || (*current)->state != JobState::kAccepted) continue;
    JobRecord& job = **current;
    if (!slurm_jobs.contains(job.owner)) {
      auto listed = slurm_.jobs(job.owner);
      if (!listed.ok()) {
        ++r.failed;
        continue;
      }
      slurm_jobs[job.owner] = std::move(*listed);
    }
    const SlurmJobEntry* found =
        job_with_comment(slurm_jobs[job.owner], job_comment(db_.instance(), job.id));
    if (found != nullptr) {
      ++r.found;
      (void)db_.submitted(job.id, found->id, found->info.state, now);
      continue;
    }
    auto request = read_stored_request(job.request);
    Status admitted = request.ok() ? admission_.admissible(*request) : Status(request.error());
    if (!admitted.ok()) {  // a share the site stopped offering since it was accepted
      (void)db_.update(job.id, JobState::kSubmitFailed, admitted.error().detail, std::nullopt, "",
                       now);
      continue;
    }
    // The walltime its limits gave it when it was accepted (the caps may have changed since).
    if (job.time_limit_s > 0) request->walltime_s = job.time_limit_s;
    SlurmJobSpec spec = admission_.slurm_job(*request, job.id, job.owner);
    if (!job.gres.empty()) spec.gres = job.gres;  // the share's GRES as it was accepted, too
    auto slurm_id = slurm_.submit(job.owner, spec);
    if (!slurm_id.ok() && slurm_id.error().code == ErrorCode::kNetwork) {
      ++r.failed;
    } else if (!slurm_id.ok()) {
      (void)db_.update(job.id, JobState::kSubmitFailed, slurm_id.error().detail, std::nullopt, "",
                       now);
    } else {
      ++r.resubmitted;
      (void)db_.submitted(job.id, *slurm_id, JobState::kPending, now);
    }
  }
  auto all = db_.list("", std::nullopt, 0, 100000);
  std::vector<std::pair<JobRecord, GpuSample>> sampled;  // running GPU jobs with samples
  std::set<int64_t> inspected, running_gpu_jobs;         // berthd ids
  std::map<int64_t, JobState> unfinished;                // Slurm id -> state
  for (JobRecord& job : all.ok() ? *all : std::vector<JobRecord>{}) {
    if (job.slurm_job_id == 0 || job_state_final(job.state)) {
      idle_.forget(job.id);
      continue;
    }
    if (sync_.refresh(job.owner, job).ok()) ++r.refreshed;
    if (!job_state_final(job.state)) unfinished[job.slurm_job_id] = job.state;
    if (!reclaim_ || job.state != JobState::kRunning || job.gpus <= 0) continue;
    running_gpu_jobs.insert(job.id);
    if (auto sample = idle_.check(job, now)) {
      inspected.insert(job.id);
      sampled.emplace_back(job, std::move(*sample));
    }
  }
  if (reclaim_) orphans_.check(sampled, inspected, running_gpu_jobs, unfinished, now);
  return r;
}

}  // namespace berth::gateway
