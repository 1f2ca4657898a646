// Limits on what one account may ask of the gateway ([limits] in berthd's configuration,
// docs/gateway.md "Limits"): the walltime and GPUs of one job, the account's running and queued
// jobs, and the shorter walltime cap of `class: cloud` jobs. Every value is set in [limits]
// (for everyone), [limits.groups."GROUP"] (for the members of a token group) or
// [limits.users.NAME] (for one local account); resolve_limits() combines them for a caller.
//
// Combination, key by key: the user's entry wins when it sets the key; else the most generous
// value among the caller's groups that set it; else the default; a key set nowhere is no limit.
// Most generous, because a group entry grants its members something (a project's allocation):
// belonging to a second group must never cost a member what the first one gave. The user entry
// wins outright, because it is the site's decision about this one person, up or down.
//
// Every limit applies to the one account making the request: a group entry sets the values for
// each of its members, it is not a quota the members share (that is Slurm's accounting, e.g. a
// QOS with GrpJobs).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace berth::gateway {

/// The keys of a limits table, in the order of kLimitNames.
enum class LimitKey {
  kMaxWalltime,
  kMaxGpusPerJob,
  kMaxRunningJobs,
  kMaxQueuedJobs,
  kCloudMaxWalltime
};
inline constexpr size_t kLimitKeys = 5;
/// Each key's name in the configuration, in errors and in the audit log.
inline constexpr std::array<const char*, kLimitKeys> kLimitNames = {
    "max_walltime_s", "max_gpus_per_job", "max_running_jobs", "max_queued_jobs",
    "cloud_max_walltime_s"};

/// The name of `key`.
inline const char* limit_name(LimitKey key) {
  return kLimitNames[static_cast<size_t>(key)];
}
/// The key named `name`, or nullopt.
std::optional<LimitKey> limit_key(std::string_view name);
/// Whether `key` is a walltime (a whole number of minutes, in seconds).
inline bool walltime_key(LimitKey key) {
  return key == LimitKey::kMaxWalltime || key == LimitKey::kCloudMaxWalltime;
}

/// One table of limits: each key set or not.
using LimitValues = std::array<std::optional<int64_t>, kLimitKeys>;

/// The [limits] section: defaults and the entries of groups and users.
struct LimitsConfig {
  LimitValues defaults;
  std::map<std::string, LimitValues> groups;  ///< by the group as tokens name it
  std::map<std::string, LimitValues> users;   ///< by local account

  /// Whether nothing at all is limited.
  bool empty() const;
};

/// One limit in force and where it comes from.
struct Limit {
  int64_t value = 0;
  std::string from;  ///< "default", "group /hpc/cloud" or "user alice"
};

/// The limits in force for one caller, by key; nullopt: no limit.
using Limits = std::array<std::optional<Limit>, kLimitKeys>;

/// The limits of local account `user`, member of the token groups `groups` (rules above).
Limits resolve_limits(const LimitsConfig& config, const std::string& user,
                      const std::vector<std::string>& groups);

/// A request refused by a limit: a 403 naming it (docs/api.md).
struct LimitRefusal {
  LimitKey key = LimitKey::kMaxWalltime;
  int64_t value = 0;      ///< the limit
  int64_t requested = 0;  ///< what the job asks for, or the jobs the account has already
  bool count = false;     ///< a count of jobs (requested is the account's current number)
  std::string from;       ///< where the limit comes from (Limit::from)
  std::string message;    ///< one line for the caller
};

/// What the limits make of one job's walltime.
struct WalltimeDecision {
  int64_t walltime_s = 0;  ///< the time limit the job gets; 0: the partition's own
  /// Where it comes from: "request", or the cap that filled in a missing walltime
  /// ("max_walltime_s", "cloud_max_walltime_s"), or "" for none.
  std::string from;
};

/// Checks one job against `limits`: its GPUs against max_gpus_per_job, its walltime against
/// max_walltime_s and, for a cloud job, cloud_max_walltime_s (the smaller cap binds). A job
/// without a walltime gets the binding cap. A GPU share (`gpu_share` > 0) holds one GPU's
/// device, so it counts as one GPU: max_gpus_per_job = 0 refuses it. Returns the walltime
/// decision, or the refusal.
std::optional<LimitRefusal> check_job_limits(const Limits& limits, int gpus, int64_t walltime_s,
                                             bool cloud, WalltimeDecision* decision,
                                             double gpu_share = 0);

/// Checks `user`'s unfinished jobs (`running`, `queued`) against max_running_jobs and
/// max_queued_jobs: a new job is refused when either count has reached its limit.
std::optional<LimitRefusal> check_count_limits(const Limits& limits, const std::string& user,
                                               int64_t running, int64_t queued);

}  // namespace berth::gateway
