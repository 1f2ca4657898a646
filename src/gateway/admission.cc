// Admission of a job (gateway/admission.h).
#include "gateway/admission.h"

#include <pwd.h>
#include <unistd.h>

#include <array>
#include <ctime>

#include "gateway/accounting.h"
#include "gateway/output.h"

namespace berth::gateway {

const char* limit_reason(LimitKey key) {
  if (key == LimitKey::kMaxGpusPerJob) return "max_gpus_per_job";
  return walltime_key(key) ? "walltime" : "limit";
}

Fit fit_of(const Verdict& v) {
  if (v.refused) return {limit_reason(v.refused->key), v.refused->message};
  if (v.over_quota) return {"quota", v.over_quota->message};
  return {};
}

Status Admission::admissible(const JobRequest& r, std::string* reason) const {
  // The site's checks, each with the broker's code of its refusal.
  const std::pair<const char*, Status> checks[] = {
      {"share_unsupported", check_share(r, config_.share)},
      {"no_gpu_model", check_gpu_model(r, config_.gpu_models)},
      {"partition", check_partition(r, config_.partitions)},
  };
  for (const auto& [code, status] : checks) {
    if (status.ok()) continue;
    if (reason != nullptr) *reason = code;
    return status;
  }
  return {};
}

Result<Verdict> Admission::check(const Account& who, const JobRequest& r, bool refresh) {
  Verdict v;
  // The job's VO, fixed now: accounting and the GPU-hour quota count the job against it.
  v.vo = BERTH_TRY(job_vo(who, r.group, quotas_, limits_));
  v.limits = resolve_limits(limits_, who.user, who.groups);
  v.refused = check_job_limits(v.limits, r.gpus, r.walltime_s, r.job_class == "cloud", &v.walltime,
                               r.gpu_share);
  if (v.refused) return v;
  // A share of a GPU is a GPU job for the quota, as its hours count (accounting.h).
  const bool asks_gpus = r.gpus > 0 || r.gpu_share > 0;
  if (asks_gpus && !quotas_.empty()) {
    // What the group used this period, read as GET /v1/accounting reads it (a source that
    // cannot be read refuses the job with an error rather than letting it past its quota).
    int64_t now = std::time(nullptr);
    Usage used = BERTH_TRY(usage_.accounting("", period_start(quotas_, now), now + 1));
    v.over_quota =
        check_gpu_quota(quotas_, usage_.quota_group(who, v.vo), asks_gpus, used.records, now);
    if (v.over_quota) return v;
  }
  v.counted = v.limits[static_cast<size_t>(LimitKey::kMaxRunningJobs)] ||
              v.limits[static_cast<size_t>(LimitKey::kMaxQueuedJobs)];
  if (v.counted) {
    auto [running, queued] = BERTH_TRY(sync_.unfinished(who.user, false));
    v.refused = check_count_limits(v.limits, who.user, running, queued);
    if (v.refused && refresh) {
      // The database may lag behind Slurm by a reconciliation interval: before refusing, read
      // the account's unfinished jobs from Slurm (network calls: the caller holds no lock).
      auto [now_running, now_queued] = BERTH_TRY(sync_.unfinished(who.user, true));
      v.refused = check_count_limits(v.limits, who.user, now_running, now_queued);
    }
  }
  return v;
}

Result<Standing> Admission::standing(const Account& who, int64_t now) const {
  Standing out;
  out.limits = resolve_limits(limits_, who.user, who.groups);
  const std::string vo = BERTH_TRY(job_vo(who, "", quotas_, limits_));
  const std::string group = usage_.quota_group(who, vo);
  auto budget = quotas_.gpu_hours.find(group);
  if (budget == quotas_.gpu_hours.end()) return out;
  Standing::Quota q;
  q.group = group;
  q.budget = budget->second;
  q.period = period_name(quotas_);
  q.since = period_start(quotas_, now);
  Usage used = BERTH_TRY(usage_.accounting("", q.since, now + 1));
  // Up to and including this second, as check_gpu_quota() counts.
  q.used = gpu_hours_of_group(used.records, group, q.since, now + 1, now);
  out.quota = std::move(q);
  return out;
}

Result<Fit> Admission::dry_run(const Account& who, const JobRequest& r) {
  std::string reason;
  if (Status taken = admissible(r, &reason); !taken.ok()) return Fit{reason, taken.error().detail};
  return fit_of(BERTH_TRY(check(who, r, false)));
}

Result<std::optional<int64_t>> Admission::start_estimate(const JobRequest& r) const {
  if (!config_.estimate.enabled) return std::optional<int64_t>();
  // As berthd's own account (start_estimate.h says why), named as Slurm's auth/jwt maps it.
  std::string self;
  struct passwd pw {};
  struct passwd* found = nullptr;
  std::array<char, 4096> buf{};
  if (::getpwuid_r(::geteuid(), &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr)
    self = pw.pw_name;
  if (self.empty())
    return make_error("estimate start", "sbatch", "berthd's own user has no name",
                      ErrorCode::kNotFound);
  SlurmJobSpec spec = slurm_spec(r, 0, "", config_, "");
  return std::optional<int64_t>(
      BERTH_TRY(estimate_start(config_.estimate, slurm_.token(self, std::time(nullptr)), spec)));
}

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
  const Verdict verdict = BERTH_TRY(check(who, asked, true));
  // A count's refusal is decided under the lock below, once the key has been looked up again:
  // a retry that raced its first request is that job, not one over the limit.
  if (verdict.refused && !verdict.refused->count) return Submitted{{}, false, verdict.refused};
  if (verdict.over_quota) return Submitted{{}, false, std::nullopt, verdict.over_quota};
  const WalltimeDecision& walltime = verdict.walltime;
  JobRequest request = asked;
  request.walltime_s = walltime.walltime_s;

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
  rec.vo = verdict.vo;
  bool existing = false;
  int64_t now = std::time(nullptr);
  JobRecord job;
  {
    // Counting and recording under one lock: two requests at once cannot both take the last
    // place under a count limit.
    std::lock_guard<std::mutex> lock(admit_mu_);
    if (verdict.counted) {
      if (!key.empty()) {
        std::optional<JobRecord> earlier = BERTH_TRY(db_.find(who.user, key));
        if (earlier) return replay(*earlier);
      }
      auto [running, queued] = BERTH_TRY(sync_.unfinished(who.user, false));
      if (auto no = check_count_limits(verdict.limits, who.user, running, queued))
        return Submitted{{}, false, std::move(no)};
    }
    job = BERTH_TRY(db_.accept(rec, now, &existing));
  }
  if (existing) return replay(job);
  // Written (and synced) before Slurm sees it: a crash from here on leaves an ACCEPTED row,
  // which reconciliation settles through the Slurm job's comment. The job is visible from
  // here (a list shows it): a cancel that came first, finding nothing in Slurm, made it
  // CANCELLED, and it is not submitted.
  const JobLocks::Held held(locks_, job.id);
  if (std::optional<JobRecord> now_recorded = BERTH_TRY(db_.get(job.id));
      now_recorded && now_recorded->state != JobState::kAccepted)
    return Submitted{*now_recorded, false, std::nullopt};
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
