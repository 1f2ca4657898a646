#include "broker/version.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace berth::broker {
namespace {

/// The parts of "12.4.1", or nothing where a part is empty or not all digits.
std::optional<std::vector<uint64_t>> parts(std::string_view v) {
  std::vector<uint64_t> out;
  if (v.empty()) return std::nullopt;
  size_t start = 0;
  for (;;) {
    size_t dot = v.find('.', start);
    std::string_view part = v.substr(start, dot == std::string_view::npos ? v.npos : dot - start);
    if (part.empty() || part.size() > 18) return std::nullopt;
    uint64_t n = 0;
    for (char ch : part) {
      if (ch < '0' || ch > '9') return std::nullopt;
      n = n * 10 + static_cast<uint64_t>(ch - '0');
    }
    out.push_back(n);
    if (dot == std::string_view::npos) return out;
    start = dot + 1;
  }
}

}  // namespace

std::optional<int> compare_versions(std::string_view a, std::string_view b) {
  auto pa = parts(a), pb = parts(b);
  if (!pa || !pb) return std::nullopt;
  size_t n = std::max(pa->size(), pb->size());
  for (size_t i = 0; i < n; ++i) {
    uint64_t x = i < pa->size() ? (*pa)[i] : 0, y = i < pb->size() ? (*pb)[i] : 0;
    if (x != y) return x < y ? -1 : 1;
  }
  return 0;
}

bool version_at_least(std::string_view have, std::string_view min) {
  if (min.empty()) return true;
  std::optional<int> c = compare_versions(have, min);
  return c && *c >= 0;
}

}  // namespace berth::broker
