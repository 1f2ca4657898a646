#include "core/clock.h"

#include <cstdio>
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

std::string rfc3339_nano(int64_t unix_ns) {
  std::time_t t = static_cast<std::time_t>(unix_ns / 1000000000);
  std::tm tm;
  ::gmtime_r(&t, &tm);
  char buf[48];
  size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%09lldZ", static_cast<long long>(unix_ns % 1000000000));
  return buf;
}

int64_t parse_rfc3339(std::string_view text) {
  std::tm tm{};
  int n = 0;
  std::string s(text);
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6 || n != 19)
    return -1;
  std::string_view rest = text.substr(19);
  // Fractions of a second (image configs carry nanoseconds): dropped.
  if (rest.starts_with('.')) {
    size_t digits = rest.find_first_not_of("0123456789", 1);
    if (digits == 1 || digits == std::string_view::npos) return -1;
    rest.remove_prefix(digits);
  }
  int64_t offset = 0;
  if (rest == "Z" || rest == "z") {
    // UTC
  } else if (rest.size() == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':') {
    int hh = 0, mm = 0;
    if (std::sscanf(std::string(rest.substr(1)).c_str(), "%2d:%2d%n", &hh, &mm, &n) != 2 || n != 5)
      return -1;
    offset = (rest[0] == '+' ? 1 : -1) * (int64_t{hh} * 3600 + int64_t{mm} * 60);
  } else {
    return -1;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<int64_t>(::timegm(&tm)) - offset;
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
