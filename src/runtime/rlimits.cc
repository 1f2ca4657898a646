#include "runtime/rlimits.h"

#include <sys/resource.h>

#include <cerrno>

namespace berth {

std::string rlimit_text(uint64_t value) {
  return value == RLIM_INFINITY ? "unlimited" : std::to_string(value);
}

Status check_ulimit(const ResourceLimit& limit) {
  struct rlimit mine {};
  if (::getrlimit(limit.resource, &mine) != 0) return sys_error("run", "--ulimit " + limit.name);
  if (limit.hard <= mine.rlim_max) return {};
  return make_error("run", "--ulimit " + limit.name,
                    "the hard limit " + rlimit_text(limit.hard) + " is above your own (" +
                        rlimit_text(mine.rlim_max) + "), which only root can raise",
                    ErrorCode::kPermission)
      .with_hint("ask for at most " + rlimit_text(mine.rlim_max));
}

int apply_rlimits(const std::vector<ResourceLimit>& limits) {
  for (const ResourceLimit& l : limits) {
    const struct rlimit r = {static_cast<rlim_t>(l.soft), static_cast<rlim_t>(l.hard)};
    if (::setrlimit(l.resource, &r) != 0) return errno;
  }
  return 0;
}

}  // namespace berth
