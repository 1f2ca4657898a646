// Admission of a job (gateway/admission.h).
#include "gateway/admission.h"

#include <ctime>

#include "gateway/output.h"

namespace berth::gateway {

Result<Submitted> Admission::submit(const Account& who, const std::string& key,
                                    const std::string& body_text, const JobRequest& asked) {
  auto replay = [&](const JobRecord& earlier) -> Result<Submitted> {
    if (earlier.request != body_text)
      return make_error("POST", "/v1/jobs",
                        "Idempotency-Key \"" + key + "\" was used for another request",
                        ErrorCode::kExists);
    return Submitted{earlier, true, std::nullopt};
  };
  // A retry of a recorded job is answered before any limit is looked at: the job is in the
  // counts already, and the limits may have changed since it was accepted.
  if (!key.empty()) {
    std::optional<JobRecord> earlier = BERTH_TRY(db_.find(who.user, key));
    if (earlier) return replay(*earlier);
  }
  // The job's VO, fixed now: accounting and the GPU-hour quota count the job against it.
  const std::string vo = BERTH_TRY(job_vo(who, asked.group, quotas_, limits_));
  const Limits limits = resolve_limits(limits_, who.user, who.groups);
  JobRequest request = asked;
  WalltimeDecision walltime;
  if (auto no = check_job_limits(limits, request.gpus, request.walltime_s,
                                 request.job_class == "cloud", &walltime, request.gpu_share))
    return Submitted{{}, false, std::move(no)};
  request.walltime_s = walltime.walltime_s;
  // A share of a GPU is a GPU job for the quota, as its hours count (accounting.h).
  const bool asks_gpus = request.gpus > 0 || request.gpu_share > 0;
  if (asks_gpus && !quotas_.empty()) {
    // What the group used this period, read as GET /v1/accounting reads it (a source that
    // cannot be read refuses the job with an error rather than letting it past its quota).
    int64_t now = std::time(nullptr);
    Usage used = BERTH_TRY(usage_.accounting("", period_start(quotas_, now), now + 1));
    if (auto no =
            check_gpu_quota(quotas_, usage_.quota_group(who, vo), asks_gpus, used.records, now))
      return Submitted{{}, false, std::nullopt, std::move(no)};
  }
  const bool counted = limits[static_cast<size_t>(LimitKey::kMaxRunningJobs)] ||
                       limits[static_cast<size_t>(LimitKey::kMaxQueuedJobs)];
  if (counted) {
    // The database may lag behind Slurm by a reconciliation interval: before refusing, read
    // the account's unfinished jobs from Slurm (outside the lock: those are network calls).
    auto [running, queued] = BERTH_TRY(sync_.unfinished(who.user, false));
    if (check_count_limits(limits, who.user, running, queued))
      (void)BERTH_TRY(sync_.unfinished(who.user, true));
  }

  JobRecord rec;
  rec.owner = who.user;
  rec.issuer = who.issuer;
  rec.subject = who.subject;
  rec.idempotency_key = key;
  rec.request = body_text;
  rec.time_limit_s = walltime.walltime_s;
  rec.time_limit_from = walltime.from;
  if (request.gpu_share > 0 && config_.share.enabled)
    rec.gres = share_gres(request.gpu_share, config_.share);
  rec.vo = vo;
  bool existing = false;
  int64_t now = std::time(nullptr);
  JobRecord job;
  {
    // Counting and recording under one lock: two requests at once cannot both take the last
    // place under a count limit.
    std::lock_guard<std::mutex> lock(admit_mu_);
    if (counted) {
      if (!key.empty()) {
        std::optional<JobRecord> earlier = BERTH_TRY(db_.find(who.user, key));
        if (earlier) return replay(*earlier);
      }
      auto [running, queued] = BERTH_TRY(sync_.unfinished(who.user, false));
      if (auto no = check_count_limits(limits, who.user, running, queued))
        return Submitted{{}, false, std::move(no)};
    }
    job = BERTH_TRY(db_.accept(rec, now, &existing));
  }
  if (existing) return replay(job);
  // Written (and synced) before Slurm sees it: a crash from here on leaves an ACCEPTED row,
  // which reconciliation settles through the Slurm job's comment.
  auto slurm_id = slurm_.submit(who.user, slurm_job(request, job.id, who.user));
  if (!slurm_id.ok() && slurm_id.error().code == ErrorCode::kNetwork) {
    // No answer: Slurm may have the job. It stays ACCEPTED; reconcile() finds it by its
    // comment, or submits it, and never twice.
    job.reason = "slurmrestd did not answer; berthd will retry";
    return Submitted{job, false, std::nullopt};
  }
  if (!slurm_id.ok()) {
    job.state = JobState::kSubmitFailed;
    job.reason = slurm_id.error().detail;
    BERTH_CHECK(db_.update(job.id, job.state, job.reason, std::nullopt, "", now));
    return Submitted{job, false, std::nullopt};
  }
  job.slurm_job_id = *slurm_id;
  job.state = JobState::kPending;
  BERTH_CHECK(db_.submitted(job.id, job.slurm_job_id, job.state, now));
  return Submitted{job, false, std::nullopt};
}

SlurmJobSpec Admission::slurm_job(const JobRequest& r, int64_t id, const std::string& owner) const {
  SlurmJobSpec spec = slurm_spec(r, id, job_comment(db_.instance(), id), config_,
                                 output_stem(db_.secret(), db_.instance(), id));
  spec.account = usage_.slurm_account(owner);
  return spec;
}

}  // namespace berth::gateway
