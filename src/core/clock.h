// Wall-clock times as Berth records them, and as `ps` says them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace berth {

/// Now, in UTC, as RFC 3339 to the second: "2026-11-23T04:20:31Z".
std::string now_rfc3339();

/// A time (Unix ns) in UTC as RFC 3339 with nanoseconds, as Docker's `logs -t` prints it:
/// "2026-11-23T04:20:31.123456789Z".
std::string rfc3339_nano(int64_t unix_ns);

/// Seconds since the epoch of an RFC 3339 time: "...Z" as now_rfc3339() writes it, with or
/// without fractions of a second (dropped), or with a "+hh:mm"/"-hh:mm" offset; -1 when `text`
/// is not one.
int64_t parse_rfc3339(std::string_view text);

/// A duration as Docker's `ps` says it (go-units HumanDuration): "Less than a second",
/// "5 seconds", "About a minute", "3 minutes", "About an hour", "5 hours", "3 days", ...
std::string human_duration(int64_t seconds);

}  // namespace berth
