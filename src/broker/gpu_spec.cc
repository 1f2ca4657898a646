// The GPU shorthand of dstack and SkyPilot (broker/gpu_spec.h).
#include "broker/gpu_spec.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "broker/gpu_names.h"
#include "core/strings.h"

namespace berth::broker {
namespace {

constexpr int kMaxCount = 10000;               // as berthd's resources.gpus
constexpr int64_t kMaxMib = int64_t{1} << 30;  // 1 PiB per GPU: beyond any card

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

/// The value of "12" or "0.5" (digits, at most one '.' between digits), else nullopt: no sign,
/// exponent or leading '.', which strtod would take.
std::optional<double> plain_number(std::string_view s) {
  size_t dot = s.find('.');
  std::string_view whole = s.substr(0, dot);
  std::string_view frac = dot == std::string_view::npos ? "" : s.substr(dot + 1);
  auto digits = [](std::string_view d) {
    return !d.empty() && d.size() <= 12 && std::all_of(d.begin(), d.end(), is_digit);
  };
  if (!digits(whole) || (dot != std::string_view::npos && !digits(frac))) return std::nullopt;
  return std::strtod(std::string(s).c_str(), nullptr);
}

/// MiB per unit of a memory size's unit ("GB" is GiB), or 0 when `unit` is not one; "" is GB
/// when `bare_is_gb` (the unit-less bound of a range with a unit).
int64_t unit_mib(std::string_view unit, bool bare_is_gb) {
  std::string u = lower(unit);
  if (u.empty()) return bare_is_gb ? 1024 : 0;
  if (u == "mb" || u == "mib") return 1;
  if (u == "gb" || u == "gib") return 1024;
  if (u == "tb" || u == "tib") return int64_t{1} << 20;
  return 0;
}

/// What one memory size says: its MiB, or that it is not a size (nullopt), or not a usable one
/// (an error detail).
struct Size {
  std::optional<int64_t> mib;
  std::string bad;
};

Size memory_size(std::string_view s, bool bare_is_gb) {
  s = trim(s);
  size_t end = 0;
  while (end < s.size() && (is_digit(s[end]) || s[end] == '.')) ++end;
  std::optional<double> n = plain_number(s.substr(0, end));
  int64_t per = unit_mib(trim(s.substr(end)), bare_is_gb);
  if (!n || per == 0) return {};
  const double mib = *n * static_cast<double>(per);
  if (mib < 1)
    return {std::nullopt, "a memory size must be at least 1MB (\"" + std::string(s) + "\")"};
  if (mib > static_cast<double>(kMaxMib))
    return {std::nullopt, "a memory size must be at most 1024TB (\"" + std::string(s) + "\")"};
  return {std::llround(mib), ""};
}

bool has_unit(std::string_view s) {
  s = trim(s);
  return !s.empty() && !is_digit(s.back()) && s.back() != '.';
}

class SpecReader {
 public:
  explicit SpecReader(std::string_view spec) : spec_(spec) {}

  Result<GpuSpec> read() {
    if (trim(spec_).empty()) return bad("it is empty");
    for (std::string_view raw : split(spec_, ':')) {
      std::string_view part = trim(raw);
      if (part.empty()) return bad("it has an empty part (between ':' or at an end)");
      BERTH_CHECK(read_part(part));
    }
    BERTH_CHECK(settle_vendor());
    return out_;
  }

 private:
  Error bad(const std::string& detail) const {
    return make_error("parse", "gpu spec \"" + std::string(spec_) + "\"", detail,
                      ErrorCode::kInvalidInput);
  }

  Status twice(const char* what, std::optional<std::string>& seen, std::string_view part) const {
    if (seen)
      return bad(std::string(what) + " is given twice (\"" + *seen + "\" and \"" +
                 std::string(part) + "\")");
    seen = std::string(part);
    return {};
  }

  Status read_part(std::string_view part) {
    std::string word = lower(part);
    if (word == "nvidia" || word == "amd" || word == "intel") {
      BERTH_CHECK(twice("a vendor", vendor_, part));
      out_.gpu.vendor = word;
      return {};
    }
    if (part.find("..") != std::string_view::npos) return read_range(part);
    if (is_digit(part[0])) {
      if (std::optional<double> n = plain_number(part)) return read_count(part, *n);
      Size m = memory_size(part, false);
      if (!m.bad.empty()) return bad(m.bad);
      if (!m.mib)
        return bad("\"" + std::string(part) + "\" is not a count, a memory size or a GPU name");
      BERTH_CHECK(twice("a memory size", memory_, part));
      out_.gpu.memory_mib_min = *m.mib;
      return {};
    }
    return read_names(part);
  }

  Status read_count(std::string_view part, double n) {
    BERTH_CHECK(twice("a count", count_, part));
    if (n > 0 && n < 1) {
      out_.count = 0;
      out_.share = n;
    } else if (n < 1) {
      return bad("a count must be at least 1");
    } else if (n != std::floor(n)) {
      return bad("a count above 1 must be a whole number (below 1 it is a share of one GPU)");
    } else if (n > kMaxCount) {
      return bad("a count must be at most " + std::to_string(kMaxCount));
    } else {
      out_.count = static_cast<int>(n);
    }
    return {};
  }

  Status read_range(std::string_view part) {
    const size_t at = part.find("..");
    std::string_view lo = trim(part.substr(0, at));
    std::string_view hi = trim(part.substr(at + 2));
    const std::string quoted = "\"" + std::string(part) + "\"";
    if (lo.empty() && hi.empty()) return bad("the range " + quoted + " has no bounds");
    if (!has_unit(lo) && !has_unit(hi)) {
      if ((lo.empty() || plain_number(lo)) && (hi.empty() || plain_number(hi)))
        return bad("a count is one number, not a range (" + quoted + ")");
      return bad(quoted + " is not a memory range such as 16GB..32GB");
    }
    int64_t bounds[2] = {0, 0};
    std::string_view sides[2] = {lo, hi};
    for (int i = 0; i < 2; ++i) {
      if (sides[i].empty()) continue;
      Size m = memory_size(sides[i], true);
      if (!m.bad.empty()) return bad(m.bad);
      if (!m.mib) return bad(quoted + " is not a memory range such as 16GB..32GB");
      bounds[i] = *m.mib;
    }
    if (bounds[1] > 0 && bounds[0] > bounds[1])
      return bad("the memory range " + quoted + " has its minimum above its maximum");
    BERTH_CHECK(twice("a memory size", memory_, part));
    out_.gpu.memory_mib_min = bounds[0];
    out_.gpu.memory_mib_max = bounds[1];
    return {};
  }

  Status read_names(std::string_view part) {
    std::vector<std::string> models;
    for (std::string_view raw : split(part, ',')) {
      std::string_view name = trim(raw);
      if (name.empty()) return bad("it has an empty GPU name in \"" + std::string(part) + "\"");
      std::string word = lower(name);
      if (word == "nvidia" || word == "amd" || word == "intel")
        return bad("\"" + std::string(name) + "\" is a vendor, not a GPU name");
      const bool letter_first = std::isalpha(static_cast<unsigned char>(name[0])) != 0;
      const bool plain = std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' ||
               c == '.' || c == ' ';
      });
      if (!letter_first || !plain)
        return bad("\"" + std::string(name) +
                   "\" is not a GPU name (a letter, then letters, digits, '-', '_', '.')");
      std::string canonical = canonical_gpu_name(name);
      if (std::find(models.begin(), models.end(), canonical) == models.end())
        models.push_back(std::move(canonical));
    }
    // After the names are checked: "A100:-1" is a bad name before it is a second list.
    BERTH_CHECK(twice("a list of GPU names", names_, part));
    out_.gpu.models = std::move(models);
    return {};
  }

  Status settle_vendor() {
    if (std::string contradiction = settle_gpu_vendor(out_.gpu); !contradiction.empty())
      return bad(contradiction);
    return {};
  }

  std::string_view spec_;
  GpuSpec out_;
  std::optional<std::string> vendor_, memory_, count_, names_;
};

}  // namespace

std::string settle_gpu_vendor(GpuRequirement& gpu) {
  std::string implied;
  bool mixed = false;
  for (const std::string& m : gpu.models) {
    std::string v = gpu_vendor_of(m);
    if (!gpu.vendor.empty() && !v.empty() && v != gpu.vendor)
      return std::string(m).append(" is an ").append(v).append(" GPU, not ").append(gpu.vendor);
    if (v.empty() || (!implied.empty() && v != implied)) mixed = true;
    implied = v;
  }
  if (gpu.vendor.empty() && !mixed) gpu.vendor = implied;
  return "";
}

Result<GpuSpec> parse_gpu_spec(std::string_view spec) {
  return SpecReader(spec).read();
}

}  // namespace berth::broker
