// A job's record kept in step with Slurm (gateway/job_sync.h).
#include "gateway/job_sync.h"

#include <algorithm>
#include <ctime>
#include <map>
#include <vector>

#include "gateway/caps.h"

namespace berth::gateway {
namespace {

/// The running and queued jobs among jobs counted by state.
std::pair<int64_t, int64_t> count_unfinished(const std::map<JobState, int64_t>& states) {
  int64_t running = 0, queued = 0;
  for (const auto& [state, n] : states) {
    if (job_state_final(state)) continue;
    (job_state_queued(state) ? queued : running) += n;
  }
  return std::make_pair(running, queued);
}

}  // namespace

Result<std::pair<int64_t, int64_t>> JobSync::unfinished(const std::string& user,
                                                        bool refresh_first) {
  std::map<JobState, int64_t> states = BERTH_TRY(db_.count_states(user));
  if (refresh_first) {
    // One listing of the account's Slurm jobs rather than a call per job: a caller at its
    // limit who keeps asking costs slurmrestd one call a request. A job the listing lacks
    // (Slurm forgets finished jobs after MinJobAge) is asked for alone.
    auto listed = slurm_.jobs(user);
    if (!listed.ok()) return count_unfinished(states);  // Slurm unreachable: the database's word
    std::map<int64_t, const SlurmJobInfo*> by_id;
    for (const SlurmJobEntry& e : *listed) by_id[e.id] = &e.info;
    for (const auto& [state, n] : states) {
      // ACCEPTED: not in Slurm yet
      if (job_state_final(state) || state == JobState::kAccepted) continue;
      auto jobs = db_.list(user, state, 0, static_cast<int>(std::min<int64_t>(n, 100000)));
      // deliberate: a job whose state cannot be read or recorded keeps its recorded state
      for (JobRecord& job : jobs.ok() ? *jobs : std::vector<JobRecord>{}) {
        auto found = by_id.find(job.slurm_job_id);
        (void)(found != by_id.end() ? record(job, *found->second) : refresh(user, job));
      }
    }
    states = BERTH_TRY(db_.count_states(user));
  }
  return count_unfinished(states);
}

Status JobSync::refresh(const std::string& user, JobRecord& job) {
  if (job.slurm_job_id == 0 || job_state_final(job.state)) return {};
  return record(job, BERTH_TRY(slurm_.job(user, job.slurm_job_id)));
}

Status JobSync::record(JobRecord& job, SlurmJobInfo info) {
  // Slurm forgets a job's GPUs (gres_detail) when it ends: what was seen while it ran stays.
  // A job first seen ended has its count from what it asked for (job_fields()) and no detail.
  if (info.gres_detail.empty()) {
    if (info.gpus == 0) info.gpus = job.gpus;
    info.gres_detail = job.gres_detail;
  }
  // A job berthd cut at its time limit (gateway/caps.h) keeps that reason, and Slurm's
  // CANCELLED for it is the TIMEOUT it stands for.
  if (ended_at_cap(job, info)) {
    info.reason = kCutAtCapReason;
    if (info.state == JobState::kCancelled) info.state = JobState::kTimeout;
  }
  if (info.state == job.state && info.reason == job.reason && info.nodes == job.nodes &&
      info.exit_code == job.exit_code && info.start_time == job.start_time &&
      info.end_time == job.end_time && info.gpus == job.gpus && info.gres_detail == job.gres_detail)
    return {};
  job.state = info.state;
  job.reason = info.reason;
  job.exit_code = info.exit_code;
  job.nodes = info.nodes;
  job.start_time = info.start_time;
  job.end_time = info.end_time;
  job.gpus = info.gpus;
  job.gres_detail = info.gres_detail;
  job.updated_at = std::time(nullptr);
  return db_.record(job);
}

}  // namespace berth::gateway
