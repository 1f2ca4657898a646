// Cloud jobs cut at their time limit by berthd (gateway/caps.h).
#include "gateway/caps.h"

#include <map>
#include <string>
#include <utility>

#include "gateway/job_request.h"

namespace berth::gateway {

bool cut_at_cap(const JobRecord& job) {
  if (job.time_limit_s <= 0) return false;
  auto request = read_stored_request(job.request);
  return request.ok() && request->job_class == "cloud";
}

std::optional<int64_t> cap_deadline(const JobRecord& job) {
  if (job.state != JobState::kRunning || job.start_time <= 0 || !cut_at_cap(job))
    return std::nullopt;
  return job.start_time + job.time_limit_s;
}

std::vector<int64_t> jobs_due(const std::vector<JobRecord>& jobs, int64_t now) {
  std::vector<int64_t> due;
  for (const JobRecord& job : jobs)
    if (auto d = cap_deadline(job); d && *d <= now) due.push_back(job.id);
  return due;
}

bool ended_at_cap(const JobRecord& job, const SlurmJobInfo& info) {
  if (job.reason == kCutAtCapReason) return true;
  return info.state == JobState::kCancelled && info.start_time > 0 && cut_at_cap(job) &&
         info.end_time >= info.start_time + job.time_limit_s;
}

int CapWatch::check(int64_t now) {
  // A database read that fails is dropped: the next check, a second later, tries again.
  std::vector<JobRecord> capped;
  for (JobState state : {JobState::kPending, JobState::kConfiguring, JobState::kRunning}) {
    auto listed = db_.list("", state, 0, 100000);
    for (JobRecord& job : listed.ok() ? *listed : std::vector<JobRecord>{})
      if (job.slurm_job_id != 0 && cut_at_cap(job)) capped.push_back(std::move(job));
  }
  // Jobs without a known start: their owners' Slurm jobs listed once, and recorded.
  std::map<std::string, std::vector<JobRecord*>> unstarted;
  for (JobRecord& job : capped)
    if (!cap_deadline(job)) unstarted[job.owner].push_back(&job);
  for (auto& [owner, jobs] : unstarted) {
    auto listed = slurm_.jobs(owner);
    if (!listed.ok()) continue;  // deliberate: slurmrestd unreachable, tried again next check
    std::map<int64_t, const SlurmJobInfo*> by_id;
    for (const SlurmJobEntry& e : *listed) by_id[e.id] = &e.info;
    for (JobRecord* job : jobs)
      if (auto found = by_id.find(job->slurm_job_id); found != by_id.end())
        (void)sync_.record(*job, *found->second);  // deliberate: a failed write, next check
  }
  int cut = 0;
  for (int64_t id : jobs_due(capped, now)) {
    if (cut_.contains(id)) continue;
    JobRecord* job = nullptr;
    for (JobRecord& j : capped)
      if (j.id == id) job = &j;
    if (!slurm_.cancel(job->owner, job->slurm_job_id).ok()) {
      // It may have ended on its own meanwhile: its state is read; else the next check retries.
      (void)sync_.refresh(job->owner, *job);
      continue;
    }
    cut_.insert(id);
    ++cut;
    // Recorded as Slurm now has it, with the cut's reason; a refresh racing this one records the
    // same end (ended_at_cap()). deliberate: Slurm unread now, the next refresh records the end
    job->reason = kCutAtCapReason;
    (void)sync_.refresh(job->owner, *job);
  }
  // Jobs no longer running are forgotten.
  std::set<int64_t> running;
  for (const JobRecord& job : capped) running.insert(job.id);
  std::erase_if(cut_, [&](int64_t id) { return !running.contains(id); });
  return cut;
}

}  // namespace berth::gateway
