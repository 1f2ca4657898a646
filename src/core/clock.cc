#include "core/clock.h"

#include <cstdio>
#include <ctime>
#include <limits>

namespace berth {

namespace {

constexpr int64_t kNanosPerSecond = 1000000000;

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

namespace {

/// An RFC 3339 time as its second since the epoch and the nanoseconds after it.
struct Rfc3339Time {
  int64_t seconds;
  int64_t nanos;
};

std::optional<Rfc3339Time> parse_rfc3339_parts(std::string_view text) {
  std::tm tm{};
  int n = 0;
  std::string s(text);
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6 ||
      n != 19)
    return std::nullopt;
  std::string_view rest = text.substr(19);
  // Fractions of a second (image configs carry nanoseconds): nanoseconds kept, the rest dropped.
  int64_t ns = 0;
  if (rest.starts_with('.')) {
    size_t digits = rest.find_first_not_of("0123456789", 1);
    if (digits == 1 || digits == std::string_view::npos) return std::nullopt;
    for (size_t i = 1; i < 10; ++i) ns = ns * 10 + (i < digits ? rest[i] - '0' : 0);
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
  return Rfc3339Time{static_cast<int64_t>(::timegm(&tm)) - offset, ns};
}

}  // namespace

std::optional<int64_t> parse_rfc3339_ms(std::string_view text) {
  std::optional<Rfc3339Time> t = parse_rfc3339_parts(text);
  if (!t) return std::nullopt;
  return t->seconds * 1000 + t->nanos / (kNanosPerSecond / 1000);
}

std::optional<int64_t> parse_rfc3339_ns(std::string_view text) {
  std::optional<Rfc3339Time> t = parse_rfc3339_parts(text);
  constexpr int64_t kMaxSeconds = std::numeric_limits<int64_t>::max() / kNanosPerSecond - 1;
  if (!t || t->seconds > kMaxSeconds || t->seconds < -kMaxSeconds) return std::nullopt;
  return t->seconds * kNanosPerSecond + t->nanos;
}

std::optional<int64_t> parse_go_duration(std::string_view text) {
  struct Unit {
    std::string_view name;
    int64_t ns;
  };
  static constexpr Unit kUnits[] = {{"ns", 1},
                                    {"us", 1000},
                                    {"\u00b5s", 1000},
                                    {"\u03bcs", 1000},
                                    {"ms", 1000000},
                                    {"s", kNanosPerSecond},
                                    {"m", 60 * kNanosPerSecond},
                                    {"h", 3600 * kNanosPerSecond}};
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  bool negative = !text.empty() && text[0] == '-';
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) text.remove_prefix(1);
  if (text == "0") return 0;
  if (text.empty()) return std::nullopt;
  int64_t total = 0;
  while (!text.empty()) {
    // A number, with a fraction or without, then its unit: "1.5h".
    size_t i = 0;
    int64_t whole = 0, fraction = 0, scale = 1;
    bool any = false;
    for (; i < text.size() && digit(text[i]); ++i, any = true) {
      if (whole > (kMax - 9) / 10) return std::nullopt;
      whole = whole * 10 + (text[i] - '0');
    }
    if (i < text.size() && text[i] == '.') {
      for (++i; i < text.size() && digit(text[i]); ++i, any = true) {
        if (scale > kMax / 100) continue;  // digits beyond int64's precision: dropped
        fraction = fraction * 10 + (text[i] - '0');
        scale *= 10;
      }
    }
    size_t end = i;
    while (end < text.size() && !digit(text[end]) && text[end] != '.') ++end;
    std::string_view name = text.substr(i, end - i);
    const Unit* unit = nullptr;
    for (const Unit& u : kUnits)
      if (u.name == name) unit = &u;
    if (!any || unit == nullptr || whole > kMax / unit->ns) return std::nullopt;
    int64_t value = whole * unit->ns + static_cast<int64_t>(static_cast<long double>(fraction) *
                                                            static_cast<long double>(unit->ns) /
                                                            static_cast<long double>(scale));
    if (value > kMax - total) return std::nullopt;
    total += value;
    text.remove_prefix(end);
  }
  return negative ? -total : total;
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
