#include "core/clock.h"

#include <ctime>

namespace berth {

std::string now_rfc3339() {
  std::time_t t = std::time(nullptr);
  std::tm tm;
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace berth
