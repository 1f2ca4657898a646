#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace berth::gateway {

/// One job's use of the cluster, from Slurm's accounting (sacct) or from berthd's database.
struct UsageRecord {
  std::string job_id;
  std::string user;
  std::string group;      ///< the Slurm account the job was charged to
  std::string gpu_model;  ///< the GRES type of its GPUs ("a100"), "" when untyped or none
  int gpus = 0;           ///< allocated
  int cpus = 0;           ///< allocated
  int64_t start = 0;      ///< Unix seconds; 0: never started
  int64_t end = 0;        ///< Unix seconds; 0: still running
  /// A share of one GPU (a `gpu_share` job: Slurm's shard or mps GRES), counted as that
  /// fraction of a GPU in GPU-hours; 0 for whole GPUs.
  double gpu_share = 0;
};

enum class GroupBy { kUser, kGroup, kGpuModel };

/// "user", "group", "gpu_model"; nullopt otherwise.
std::optional<GroupBy> parse_group_by(std::string_view text);

struct UsageRow {
  std::string key;
  double gpu_hours = 0;
  double cpu_hours = 0;
  int jobs = 0;  ///< jobs that ran for some time inside the window
};

/// Sums GPU-hours (allocated GPUs, or a job's share of one, x time run) and CPU-hours over [since,
/// until), a running job counted up to `now`; each job's time is clipped to the window. Rows sorted
/// by key.
std::vector<UsageRow> aggregate_usage(const std::vector<UsageRecord>& records, int64_t since,
                                      int64_t until, int64_t now, GroupBy by);

/// The GPU-hours `group` used in [since, until) (a quota check).
double gpu_hours_of_group(const std::vector<UsageRecord>& records, const std::string& group,
                          int64_t since, int64_t until, int64_t now);

/// The rows as JSON ({"group_by", "since", "until", "rows": [...]}) and as CSV (a header line
/// "<group_by>,gpu_hours,cpu_hours,jobs", hours with 4 decimals).
nlohmann::json usage_json(const std::vector<UsageRow>& rows, GroupBy by, int64_t since,
                          int64_t until);
std::string usage_csv(const std::vector<UsageRow>& rows, GroupBy by);

/// How a site splits GPUs ([share]): a job's `share_gres` TRES count over `units_per_gpu` is
/// its share of one GPU. Empty: no sharing, such TRES are not GPUs.
struct ShareUnits {
  std::string gres;  ///< "shard" or "mps"
  int64_t units_per_gpu = 0;
};

/// Records from `sacct --json` (Slurm 22.05's data parser 0.0.38: jobs[].tres.allocated,
/// time.start/end, user, account). GPUs are the untyped gres "gpu" count, the model the suffix of
/// a typed "gpu:MODEL" entry; a `share.gres` entry is a share of one GPU (its count over the
/// units per GPU); jobs that never started are left out.
Result<std::vector<UsageRecord>> usage_from_sacct_json(const std::string& text,
                                                       const ShareUnits& share = {});

}  // namespace berth::gateway
