// The jobs' usage, for GET /v1/accounting and the GPU-hour quota check: from Slurm's
// accounting (sacct, gateway/sacct.h) or berthd's own database, as [accounting] source says;
// the Slurm account a user's jobs are charged to; and the VO (token group) a job is accounted to.
//
// A job's VO is fixed when it is accepted (JobRecord::vo, job_vo()). With [accounting]
// group_by = "token" (the default) usage and GPU-hour quotas group jobs by it; with "unix", by
// the owner's Unix primary group as before. Slurm's accounting (sacct) knows only the Slurm
// account: with "token", a record of a job berthd submitted (same Slurm job id and user) takes
// that job's VO from the database, other jobs keep their Slurm account as their group.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "gateway/accounting.h"
#include "gateway/auth.h"
#include "gateway/config.h"
#include "gateway/jobs_db.h"

namespace berth::gateway {

/// The name of group `gid`, or "" when it has none. Reentrant: the server's threads may ask at
/// once.
std::string group_name(gid_t gid);

/// The VO a job of `who` is accounted to: `asked` (the request's "group") when it is one of
/// `who`'s token groups, an error (kPermission) naming them when it is not; else the first
/// of `who`'s token groups with a [quotas.groups] or [limits.groups] entry; else the first
/// token group; else `who`'s Unix primary group.
Result<std::string> job_vo(const Account& who, const std::string& asked, const QuotaConfig& quotas,
                           const LimitsConfig& limits);

/// Usage records and where they come from ("database" or "sacct").
struct Usage {
  std::vector<UsageRecord> records;
  std::string source;
};

/// The usage of the jobs, read as [accounting] says.
class JobUsage {
 public:
  /// `share`: [share], for the units of a GPU share that sacct reports.
  JobUsage(JobsDb& db, AccountingConfig accounting, ShareConfig share)
      : db_(db), accounting_(std::move(accounting)), share_(std::move(share)) {}

  /// The jobs of `owner` ("" for all) as usage records (GET /v1/accounting without sacct): the
  /// group is the job's VO (group_by "token"; a job without one, and group_by "unix": the
  /// owner's primary group), the CPUs nodes x tasks x cpus_per_task of the request,
  /// the GPU model the type in Slurm's GRES detail.
  Result<std::vector<UsageRecord>> records(const std::string& owner) const;
  /// The usage of `owner` ("" for all) in [since, until), from the accounting source
  /// ([accounting] source; GET /v1/accounting and the quota check read the same). With
  /// "sacct", an error when sacct fails (code kBusy); with "auto", the database's then.
  Result<Usage> accounting(const std::string& owner, int64_t since, int64_t until) const;
  /// The Slurm account `user`'s jobs are charged to: its primary group with [accounting]
  /// slurm_account = "primary_group", else "" (Slurm's default account).
  std::string slurm_account(const std::string& user) const;
  /// The group a job of `who` with VO `vo` counts against for quotas, as records() and
  /// accounting() group it: `vo` with group_by "token", `who`'s primary group with "unix".
  std::string quota_group(const Account& who, const std::string& vo) const;

 private:
  JobsDb& db_;
  AccountingConfig accounting_;
  ShareConfig share_;
};

}  // namespace berth::gateway
