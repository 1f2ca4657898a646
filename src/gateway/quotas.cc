// GPU-hour quotas (gateway/quotas.h).
#include "gateway/quotas.h"

#include "core/clock.h"

#include <fmt/core.h>

#include <ctime>

namespace berth::gateway {

int64_t period_start(const QuotaConfig& config, int64_t now) {
  if (config.period_s > 0) return now - now % config.period_s;
  auto t = static_cast<time_t>(now);
  struct tm tm {};
  ::gmtime_r(&t, &tm);
  tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
  if (config.period == "month") {
    tm.tm_mday = 1;
  } else if (config.period == "week") {
    int since_monday = (tm.tm_wday + 6) % 7;
    return static_cast<int64_t>(::timegm(&tm)) - int64_t{since_monday} * 86400;
  }
  return ::timegm(&tm);
}

std::string period_name(const QuotaConfig& config) {
  if (config.period_s > 0) return std::to_string(config.period_s) + " s period";
  return config.period;
}

std::optional<QuotaRefusal> check_gpu_quota(const QuotaConfig& config, const std::string& group,
                                            bool asks_gpus, const std::vector<UsageRecord>& records,
                                            int64_t now) {
  if (!asks_gpus) return std::nullopt;
  auto budget = config.gpu_hours.find(group);
  if (budget == config.gpu_hours.end()) return std::nullopt;
  int64_t since = period_start(config, now);
  // Up to and including this second: a job running now has used the time up to now.
  double used = gpu_hours_of_group(records, group, since, now + 1, now);
  if (used < budget->second) return std::nullopt;
  QuotaRefusal no;
  no.group = group;
  no.budget = budget->second;
  no.used = used;
  no.period = period_name(config);
  no.since = since;
  no.key = "[quotas.groups.\"" + group + "\"] gpu_hours";
  std::string from = rfc3339(since);
  no.message = fmt::format(
      "group {} has used {:.4f} of its {:g} GPU-hours in the {} from {}, "
      "the quota {} = {:g}",
      group, used, no.budget, no.period, from, no.key, no.budget);
  return no;
}

}  // namespace berth::gateway
