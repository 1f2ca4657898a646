// Wall-clock times as Berth records them (RFC 3339, UTC), and as `ps` says them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace berth {

/// Now, in UTC, as RFC 3339 to the second: "2026-11-23T04:20:31Z".
std::string now_rfc3339();

/// A time (Unix seconds) in UTC as RFC 3339 to the second: "2026-11-23T04:20:31Z".
std::string rfc3339(int64_t unix_s);

/// A time (Unix ms) in UTC as RFC 3339 to the millisecond: "2026-11-26T03:40:23.042Z" (before
/// 1970 the milliseconds count up from the second below: -1 is "1969-12-31T23:59:59.999Z").
std::string rfc3339_ms(int64_t unix_ms);

/// A time (Unix ns) in UTC as RFC 3339 with nanoseconds, as Docker's `logs -t` prints it:
/// "2026-11-23T04:20:31.123456789Z".
std::string rfc3339_nano(int64_t unix_ns);

/// Seconds since the epoch of an RFC 3339 time: "...Z" as now_rfc3339() writes it, with or
/// without fractions of a second (dropped), or with a "+hh:mm"/"-hh:mm" offset; -1 when `text`
/// is not one.
int64_t parse_rfc3339(std::string_view text);

/// Milliseconds since the epoch of an RFC 3339 time, as parse_rfc3339() reads it (digits of the
/// fraction beyond the third dropped); nullopt when `text` is not one.
std::optional<int64_t> parse_rfc3339_ms(std::string_view text);

/// Nanoseconds since the epoch of an RFC 3339 time, as parse_rfc3339() reads it (digits of the
/// fraction beyond the ninth dropped): what rfc3339_nano() writes reads back exactly.
std::optional<int64_t> parse_rfc3339_ns(std::string_view text);

/// A duration as Go's time.ParseDuration reads it ("42m", "1h30m", "1.5s", "300ms", "-2h"; units
/// ns, us, ms, s, m, h), in nanoseconds; nullopt when `text` is not one (a number without a
/// unit, "0" apart, is not).
std::optional<int64_t> parse_go_duration(std::string_view text);

/// A duration as Docker's `ps` says it (go-units HumanDuration): "Less than a second",
/// "5 seconds", "About a minute", "3 minutes", "About an hour", "5 hours", "3 days", ...
std::string human_duration(int64_t seconds);

}  // namespace berth
