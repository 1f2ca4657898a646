// GPU-hour quotas ([quotas] in berthd's configuration, docs/gateway.md "Quotas"): each group
// named in [quotas.groups."GROUP"] may use `gpu_hours` GPU-hours per period (a calendar month,
// week or day in UTC, or a fixed number of seconds counted from the Unix epoch). A new job that
// asks for GPUs is refused while the group has used its budget in the current period; jobs
// without GPUs are never refused by a quota.
//
// The group is the accounting group (gateway/accounting.h): the Slurm account a job was charged
// to, which berthd sets to the caller's primary group ([accounting] slurm_account), or, from
// berthd's own database, the owner's primary group. The budget is what the group used, running
// jobs counted up to now; what the new job will use is not known in advance and is not added.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gateway/accounting.h"

namespace berth::gateway {

/// The [quotas] section.
struct QuotaConfig {
  /// "month", "week" (from Monday) or "day", in UTC; "" with period_s.
  std::string period = "month";
  /// > 0: periods of this many seconds counted from the Unix epoch (instead of `period`).
  int64_t period_s = 0;
  std::map<std::string, double> gpu_hours;  ///< the budget of each group, by group name

  /// Whether no group has a quota.
  bool empty() const { return gpu_hours.empty(); }
};

/// The start (Unix seconds) of the period that holds `now`.
int64_t period_start(const QuotaConfig& config, int64_t now);
/// The period as messages name it: "month", "week", "day" or "3600 s period".
std::string period_name(const QuotaConfig& config);

/// A GPU job refused by its group's quota: a 403 naming it (docs/api.md).
struct QuotaRefusal {
  std::string group;
  double budget = 0;    ///< GPU-hours per period
  double used = 0;      ///< GPU-hours used in the current period
  std::string period;   ///< period_name()
  int64_t since = 0;    ///< the current period's start
  std::string key;      ///< the configuration key: [quotas.groups."GROUP"] gpu_hours
  std::string message;  ///< one line for the caller
};

/// Checks a job charged to `group` that asks for GPUs (whole ones or a share of one) against
/// the group's quota, given the usage `records` (at least those of the current period; others
/// are clipped away). nullopt: no GPUs asked for, no quota for the group, or budget left.
std::optional<QuotaRefusal> check_gpu_quota(const QuotaConfig& config, const std::string& group,
                                            bool asks_gpus, const std::vector<UsageRecord>& records,
                                            int64_t now);

}  // namespace berth::gateway
