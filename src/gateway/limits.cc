// Limit resolution and checks (gateway/limits.h).
#include "gateway/limits.h"

#include <fmt/core.h>

#include <algorithm>

namespace berth::gateway {
namespace {

const std::optional<Limit>& get(const Limits& limits, LimitKey key) {
  return limits[static_cast<size_t>(key)];
}

LimitRefusal refusal(LimitKey key, const Limit& limit, int64_t requested, bool count,
                     const std::string& what) {
  return {key,
          limit.value,
          requested,
          count,
          limit.from,
          what + ", the limit " + limit_name(key) + " = " + std::to_string(limit.value) + " (" +
              limit.from + ")"};
}

}  // namespace

std::optional<LimitKey> limit_key(std::string_view name) {
  for (size_t i = 0; i < kLimitKeys; ++i)
    if (name == kLimitNames[i]) return static_cast<LimitKey>(i);
  return std::nullopt;
}

bool LimitsConfig::empty() const {
  auto none = [](const LimitValues& v) {
    return std::none_of(v.begin(), v.end(), [](const auto& x) { return x.has_value(); });
  };
  return none(defaults) &&
         std::all_of(groups.begin(), groups.end(), [&](const auto& g) { return none(g.second); }) &&
         std::all_of(users.begin(), users.end(), [&](const auto& u) { return none(u.second); });
}

Limits resolve_limits(const LimitsConfig& config, const std::string& user,
                      const std::vector<std::string>& groups) {
  Limits out;
  auto own = config.users.find(user);
  for (size_t k = 0; k < kLimitKeys; ++k) {
    if (own != config.users.end() && own->second[k]) {
      out[k] = Limit{*own->second[k], "user " + user};
      continue;
    }
    // Every limit is "at most": the most generous is the largest. Groups are taken in the
    // token's order, so among equal values the first named is reported.
    for (const std::string& g : groups) {
      auto entry = config.groups.find(g);
      if (entry == config.groups.end() || !entry->second[k]) continue;
      if (!out[k] || *entry->second[k] > out[k]->value)
        out[k] = Limit{*entry->second[k], "group " + g};
    }
    if (!out[k] && config.defaults[k]) out[k] = Limit{*config.defaults[k], "default"};
  }
  return out;
}

std::optional<LimitRefusal> check_job_limits(const Limits& limits, int gpus, int64_t walltime_s,
                                             bool cloud, WalltimeDecision* decision,
                                             double gpu_share) {
  if (const auto& l = get(limits, LimitKey::kMaxGpusPerJob); l && gpu_share > 0 && l->value < 1)
    return refusal(LimitKey::kMaxGpusPerJob, *l, 1, false,
                   "the job asks for a share of a GPU (" + fmt::format("{:g}", gpu_share) + ")");
  if (const auto& l = get(limits, LimitKey::kMaxGpusPerJob); l && gpus > l->value)
    return refusal(LimitKey::kMaxGpusPerJob, *l, gpus, false,
                   "the job asks for " + std::to_string(gpus) + " GPUs");
  // The cap that binds: the smaller of max_walltime_s and, for a cloud job,
  // cloud_max_walltime_s (the cloud cap on a tie, being the more specific).
  LimitKey cap_key = LimitKey::kMaxWalltime;
  std::optional<Limit> cap = get(limits, LimitKey::kMaxWalltime);
  if (const auto& c = get(limits, LimitKey::kCloudMaxWalltime);
      cloud && c && (!cap || c->value <= cap->value)) {
    cap_key = LimitKey::kCloudMaxWalltime;
    cap = c;
  }
  *decision = {walltime_s, walltime_s > 0 ? "request" : ""};
  if (!cap) return std::nullopt;
  if (walltime_s > cap->value)
    return refusal(cap_key, *cap, walltime_s, false,
                   std::string(cloud ? "the cloud job" : "the job") + " asks for a walltime of " +
                       std::to_string(walltime_s) + " s");
  if (walltime_s == 0) *decision = {cap->value, limit_name(cap_key)};
  return std::nullopt;
}

std::optional<LimitRefusal> check_count_limits(const Limits& limits, const std::string& user,
                                               int64_t running, int64_t queued) {
  if (const auto& l = get(limits, LimitKey::kMaxRunningJobs); l && running >= l->value)
    return refusal(LimitKey::kMaxRunningJobs, *l, running, true,
                   user + " has " + std::to_string(running) + " running jobs");
  if (const auto& l = get(limits, LimitKey::kMaxQueuedJobs); l && queued >= l->value)
    return refusal(LimitKey::kMaxQueuedJobs, *l, queued, true,
                   user + " has " + std::to_string(queued) + " queued jobs");
  return std::nullopt;
}

}  // namespace berth::gateway
