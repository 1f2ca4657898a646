// The jobs' usage, for GET /v1/accounting and the GPU-hour quota check: from Slurm's
// accounting (sacct, gateway/sacct.h) or berthd's own database, as [accounting] source says;
// and the Slurm account a user's jobs are charged to.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "gateway/accounting.h"
#include "gateway/config.h"
#include "gateway/jobs_db.h"

namespace berth::gateway {

/// The name of group `gid`, or "" when it has none. Reentrant: the server's threads may ask at
/// once.
std::string group_name(gid_t gid);

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
  /// group is the owner's primary group, the CPUs nodes x tasks x cpus_per_task of the request,
  /// the GPU model the type in Slurm's GRES detail.
  Result<std::vector<UsageRecord>> records(const std::string& owner) const;
  /// The usage of `owner` ("" for all) in [since, until), from the accounting source
  /// ([accounting] source; GET /v1/accounting and the quota check read the same). With
  /// "sacct", an error when sacct fails (code kBusy); with "auto", the database's then.
  Result<Usage> accounting(const std::string& owner, int64_t since, int64_t until) const;
  /// The Slurm account `user`'s jobs are charged to: its primary group with [accounting]
  /// slurm_account = "primary_group", else "" (Slurm's default account).
  std::string slurm_account(const std::string& user) const;

 private:
  JobsDb& db_;
  AccountingConfig accounting_;
  ShareConfig share_;
};

}  // namespace berth::gateway
