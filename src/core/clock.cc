#include "core/clock.h"

#include <cstdio>
#include <ctime>

namespace berth {

namespace {

/// floor(a / b), for b > 0: the second a time before 1970 falls in.
int64_t floor_div(int64_t a, int64_t b) {
  return a / b - (a % b < 0 ? 1 : 0);
}

/// "2026-11-23T04:20:31": `unix_s` in UTC, to the second, without the zone.
std::string utc_seconds(int64_t unix_s) {
  std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return buf;
}

/// `unix` in units of 1/`per_second` s: the second's text, then the fraction in `digits` digits.
std::string with_fraction(int64_t unix, int64_t per_second, int digits) {
  int64_t secs = floor_div(unix, per_second);
  char frac[16];
  std::snprintf(frac, sizeof frac, ".%0*lldZ", digits,
                static_cast<long long>(unix - secs * per_second));
  return utc_seconds(secs) + frac;
}

}  // namespace

std::string now_rfc3339() {
  return rfc3339(std::time(nullptr));
}

std::string rfc3339(int64_t unix_s) {
  return utc_seconds(unix_s) + "Z";
}

std::string rfc3339_ms(int64_t unix_ms) {
  return with_fraction(unix_ms, 1000, 3);
}

std::string rfc3339_nano(int64_t unix_ns) {
  return with_fraction(unix_ns, 1000000000, 9);
}

std::optional<int64_t> parse_rfc3339_ms(std::string_view text) {
  std::tm tm{};
  int n = 0;
  std::string s(text);
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6 ||
      n != 19)
    return std::nullopt;
  std::string_view rest = text.substr(19);
  // Fractions of a second (image configs carry nanoseconds): milliseconds kept, the rest dropped.
  int64_t ms = 0;
  if (rest.starts_with('.')) {
    size_t digits = rest.find_first_not_of("0123456789", 1);
    if (digits == 1 || digits == std::string_view::npos) return std::nullopt;
    for (size_t i = 1; i < 4; ++i) ms = ms * 10 + (i < digits ? rest[i] - '0' : 0);
    rest.remove_prefix(digits);
  }
  int64_t offset = 0;
  if (rest == "Z" || rest == "z") {
    // UTC
  } else if (rest.size() == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':') {
    int hh = 0, mm = 0;
    if (std::sscanf(std::string(rest.substr(1)).c_str(), "%2d:%2d%n", &hh, &mm, &n) != 2 || n != 5)
      return std::nullopt;
    offset = (rest[0] == '+' ? 1 : -1) * (int64_t{hh} * 3600 + int64_t{mm} * 60);
  } else {
    return std::nullopt;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return (static_cast<int64_t>(::timegm(&tm)) - offset) * 1000 + ms;
}

int64_t parse_rfc3339(std::string_view text) {
  std::optional<int64_t> ms = parse_rfc3339_ms(text);
  return ms ? floor_div(*ms, 1000) : -1;
}

std::string human_duration(int64_t seconds) {
  auto plural = [](int64_t n, const char* unit) { return std::to_string(n) + " " + unit; };
  if (seconds < 1) return "Less than a second";
  if (seconds == 1) return "1 second";
  if (seconds < 60) return plural(seconds, "seconds");
  int64_t minutes = seconds / 60;
  if (minutes == 1) return "About a minute";
  if (minutes < 60) return plural(minutes, "minutes");
  int64_t hours = (seconds + 1800) / 3600;  // rounded, as Go's int(d.Hours() + 0.5)
  if (hours == 1) return "About an hour";
  if (hours < 48) return plural(hours, "hours");
  constexpr int64_t kDay = 24;  // hours
  if (hours < kDay * 7 * 2) return plural(hours / kDay, "days");
  if (hours < kDay * 30 * 2) return plural(hours / kDay / 7, "weeks");
  if (hours < kDay * 365 * 2) return plural(hours / kDay / 30, "months");
  return plural(hours / kDay / 365, "years");
}

}  // namespace berth
