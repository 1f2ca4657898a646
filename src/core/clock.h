// Wall-clock times as Berth records them.
#pragma once

#include <string>

namespace berth {

/// Now, in UTC, as RFC 3339 to the second: "2026-11-23T04:20:31Z".
std::string now_rfc3339();

}  // namespace berth
