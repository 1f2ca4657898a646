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
#include "gateway/job_locks.h"
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

/// What the checks berthd makes before it records a job make of a request (Admission::check()):
/// the job's VO and walltime, or the limit or quota that refuses it.
struct Verdict {
  std::string vo;             ///< the job's VO (job_vo())
  Limits limits;              ///< the caller's (resolve_limits())
  WalltimeDecision walltime;  ///< the time limit the job gets (check_job_limits())
  bool counted = false;       ///< max_running_jobs or max_queued_jobs applies to the caller
  std::optional<LimitRefusal> refused;     ///< set: a limit refuses the job
  std::optional<QuotaRefusal> over_quota;  ///< set: its group's GPU-hour quota refuses it
};

/// Whether a job would be taken (POST /v1/jobs?dry_run=1), in the broker's reason codes
/// (docs/broker.md).
struct Fit {
  /// "" when the job fits; else "max_gpus_per_job", "walltime", "quota", "no_gpu_model",
  /// "share_unsupported", "partition" or "limit" (another limit, which the message names).
  std::string reason;
  std::string message;  ///< one line; "" when the job fits
  /// Whether the job fits.
  bool fits() const { return reason.empty(); }
};

/// The broker's reason code of a refusal by limit `key`: "max_gpus_per_job", "walltime" (a
/// walltime cap) or "limit" (any other).
const char* limit_reason(LimitKey key);

/// The fit of verdict `v`: its limit's refusal (limit_reason()), then its quota's ("quota"),
/// each with the refusal's message; else it fits.
Fit fit_of(const Verdict& v);

/// Where a caller stands at the site (GET /v1/me): the limits in force for them and, where
/// their group has one, its GPU-hour quota this period.
struct Standing {
  Limits limits;  ///< resolve_limits()
  struct Quota {
    std::string group;   ///< the group a job of theirs without "group" counts against
    double budget = 0;   ///< GPU-hours per period
    double used = 0;     ///< in the current period
    std::string period;  ///< period_name()
    int64_t since = 0;   ///< the current period's start
  };
  std::optional<Quota> quota;  ///< nullopt: no quota for that group
};

/// Admits and submits jobs; shared by the server's threads.
class Admission {
 public:
  Admission(JobsDb& db, SlurmRest& slurm, JobSync& sync, JobLocks& locks, const JobUsage& usage,
            SlurmConfig config, LimitsConfig limits, QuotaConfig quotas)
      : db_(db),
        slurm_(slurm),
        sync_(sync),
        locks_(locks),
        usage_(usage),
        config_(std::move(config)),
        limits_(std::move(limits)),
        quotas_(std::move(quotas)) {}

  /// Whether the site takes `r`: check_share() with [share], check_gpu_model() with
  /// [gpu_models], check_partition() with [slurm] partitions. On a refusal `reason`, when
  /// given, is set to the broker's code of the check: "share_unsupported", "no_gpu_model" or
  /// "partition".
  Status admissible(const JobRequest& r, std::string* reason = nullptr) const;
  /// The checks of `who`'s request `r` that submit() makes before it records a job: the job's
  /// VO (a "group" that is not one of `who`'s token groups: an error, kPermission), `who`'s
  /// per-job limits, for a GPU job its group's GPU-hour quota (the group is the job's VO,
  /// job_vo(), or with [accounting] group_by "unix" `who`'s primary group; the usage read as
  /// GET /v1/accounting reads it), and the counts of `who`'s unfinished jobs in the database.
  /// With `refresh`, counts that refuse the job are read again from Slurm first (the database
  /// may lag); without it nothing reaches Slurm.
  Result<Verdict> check(const Account& who, const JobRequest& r, bool refresh);
  /// Whether `who`'s request `r` would be taken now: admissible(), then check() without
  /// refresh, as fit_of() words it. Nothing is recorded or sent to Slurm.
  Result<Fit> dry_run(const Account& who, const JobRequest& r);
  /// When request `r` would start, as the site's start estimate says ([slurm] start_estimate,
  /// gateway/start_estimate.h): nullopt where none is configured, an error where Slurm could
  /// not tell. Nothing is submitted.
  Result<std::optional<int64_t>> start_estimate(const JobRequest& r) const;
  /// Where `who` stands now: their limits, and the GPU-hour quota of the group their jobs
  /// count against by default (job_vo() of no "group"), with its usage read as check() reads
  /// it (an error, kBusy, when that source cannot be read).
  Result<Standing> standing(const Account& who, int64_t now) const;
  /// check()s the request with refresh, records it (before anything reaches Slurm), then
  /// submits it as `who` with the walltime the limits gave it. A request whose key `who`
  /// already used gets the earlier job back, unsent and unchecked (it counts among the jobs it
  /// would otherwise be refused for); with another body, an error (kExists).
  Result<Submitted> submit(const Account& who, const std::string& idempotency_key,
                           const std::string& body_text, const JobRequest& request);
  /// The Slurm job of request `r` of job `id` owned by `owner`: slurm_spec() with the job's
  /// comment, output files and Slurm account (for submit() and reconciliation alike).
  SlurmJobSpec slurm_job(const JobRequest& r, int64_t id, const std::string& owner) const;

 private:
  JobsDb& db_;
  SlurmRest& slurm_;
  JobSync& sync_;
  JobLocks& locks_;  ///< held from a new job's submission to its record
  const JobUsage& usage_;
  SlurmConfig config_;
  LimitsConfig limits_;
  QuotaConfig quotas_;
  std::mutex admit_mu_;  ///< held from counting an account's jobs to recording its new one
};

}  // namespace berth::gateway
