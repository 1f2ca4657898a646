// Admission of a job (POST /v1/jobs): the site's GPU-share offer, the caller's limits
// (gateway/limits.h) and its group's GPU-hour quota (gateway/quotas.h), an idempotent record of
// the request before anything reaches Slurm, and its submission.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "core/error.h"
#include "gateway/auth.h"
#include "gateway/config.h"
#include "gateway/job_request.h"
#include "gateway/job_sync.h"
#include "gateway/job_usage.h"
#include "gateway/jobs_db.h"
#include "gateway/limits.h"
#include "gateway/quotas.h"
#include "gateway/slurm_rest.h"

namespace berth::gateway {

/// What a submission came to.
struct Submitted {
  JobRecord job;
  bool replayed = false;                   ///< an earlier request with the same Idempotency-Key
  std::optional<LimitRefusal> refused;     ///< set: nothing was recorded or sent (a 403)
  std::optional<QuotaRefusal> over_quota;  ///< set: likewise, for a GPU-hour quota (a 403)
};

/// Admits and submits jobs; shared by the server's threads.
class Admission {
 public:
  Admission(JobsDb& db, SlurmRest& slurm, JobSync& sync, const JobUsage& usage, SlurmConfig config,
            LimitsConfig limits, QuotaConfig quotas)
      : db_(db),
        slurm_(slurm),
        sync_(sync),
        usage_(usage),
        config_(std::move(config)),
        limits_(std::move(limits)),
        quotas_(std::move(quotas)) {}

  /// Whether the site takes `r`: check_share() with [share], check_gpu_model() with
  /// [gpu_models], check_partition() with [slurm] partitions.
  Status admissible(const JobRequest& r) const {
    BERTH_CHECK(check_share(r, config_.share));
    BERTH_CHECK(check_gpu_model(r, config_.gpu_models));
    return check_partition(r, config_.partitions);
  }
  /// Checks the request against `who`'s limits and, for a GPU job, its group's GPU-hour quota
  /// (the group is the job's VO, job_vo(), or with [accounting] group_by "unix" `who`'s
  /// primary group; the usage read as GET /v1/accounting reads it; a "group" that is not
  /// one of `who`'s token groups: an error, kPermission),
  /// records it (before anything reaches Slurm), then submits it as `who` with the walltime
  /// the limits gave it. A request whose key `who` already used gets the earlier job back,
  /// unsent and unchecked (it counts among the jobs it would otherwise be refused for); with
  /// another body, an error (kExists).
  Result<Submitted> submit(const Account& who, const std::string& idempotency_key,
                           const std::string& body_text, const JobRequest& request);
  /// The Slurm job of request `r` of job `id` owned by `owner`: slurm_spec() with the job's
  /// comment, output files and Slurm account (for submit() and reconciliation alike).
  SlurmJobSpec slurm_job(const JobRequest& r, int64_t id, const std::string& owner) const;

 private:
  JobsDb& db_;
  SlurmRest& slurm_;
  JobSync& sync_;
  const JobUsage& usage_;
  SlurmConfig config_;
  LimitsConfig limits_;
  QuotaConfig quotas_;
  std::mutex admit_mu_;  ///< held from counting an account's jobs to recording its new one
};

}  // namespace berth::gateway
