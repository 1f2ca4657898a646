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

Version cuda_version_from_int(int v) {
  if (v <= 0) return {};
  return Version{{v / 1000, (v % 1000) / 10}, {}};
}

}  // namespace berth
