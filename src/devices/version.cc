#include "devices/version.h"

#include <algorithm>

namespace berth {

std::string Version::str() const {
  if (parts.empty()) return "unknown";
  if (!text.empty()) return text;
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) s += '.';
    s += std::to_string(parts[i]);
  }
  return s;
}

std::optional<Version> parse_version(std::string_view s) {
  Version v;
  int cur = -1;
  for (char c : s) {
    if (c >= '0' && c <= '9') {
      if (cur > 100000000) return std::nullopt;  // not a plausible version part
      cur = (cur < 0 ? 0 : cur * 10) + (c - '0');
    } else if (c == '.' && cur >= 0) {
      v.parts.push_back(cur);
      cur = -1;
    } else {
      return std::nullopt;
    }
  }
  if (cur < 0) return std::nullopt;
  v.parts.push_back(cur);
  v.text = std::string(s);
  return v;
}

int compare_versions(const Version& a, const Version& b) {
  size_t n = std::max(a.parts.size(), b.parts.size());
  for (size_t i = 0; i < n; ++i) {
    int x = i < a.parts.size() ? a.parts[i] : 0;
    int y = i < b.parts.size() ? b.parts[i] : 0;
    if (x != y) return x < y ? -1 : 1;
  }
  return 0;
}

bool version_at_least(std::string_view have, std::string_view min) {
  if (min.empty()) return true;
  auto h = parse_version(have), m = parse_version(min);
  return h && m && compare_versions(*h, *m) >= 0;
}

Version cuda_version_from_int(int v) {
  if (v <= 0) return {};
  return Version{{v / 1000, (v % 1000) / 10}, {}};
}

Version cuda_version_for_driver(const Version& driver) {
  // NVIDIA's "CUDA Toolkit and Corresponding Driver Versions" (CUDA Toolkit Release Notes,
  // table 3, https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/): the first driver
  // branch of each CUDA release (Linux x86_64); a driver reports the newest CUDA its branch
  // reached, newest first here.
  struct Row {
    int branch;
    int major, minor;
  };
  static constexpr Row kTable[] = {
      {580, 13, 0}, {575, 12, 9}, {570, 12, 8}, {560, 12, 6}, {555, 12, 5}, {550, 12, 4},
      {545, 12, 3}, {535, 12, 2}, {530, 12, 1}, {525, 12, 0}, {520, 11, 8}, {515, 11, 7},
      {510, 11, 6}, {495, 11, 5}, {470, 11, 4}, {465, 11, 3}, {460, 11, 2}, {455, 11, 1},
      {450, 11, 0}, {440, 10, 2}, {418, 10, 1}, {410, 10, 0},
  };
  if (!driver.known()) return {};
  for (const Row& r : kTable)
    if (driver.major() >= r.branch) return Version{{r.major, r.minor}, {}};
  return {};
}

}  // namespace berth
