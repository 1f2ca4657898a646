// Version numbers as GPU facts spell them: a compute capability ("8.9"), a CUDA version
// ("12.4"), a driver's ("550.54.15"). Compared as numbers, part by part, so that "12.10" is
// newer than "12.9" and a minimum is a minimum (INDIGO's orchestrator compared
// cuda_min_version for equality, ../shared/research/broker.md 1.1).
#pragma once

#include <optional>
#include <string_view>

namespace berth::broker {

/// -1, 0 or 1 as `a` is older than, the same as or newer than `b`; a missing part is 0
/// ("12" == "12.0"). std::nullopt where either is not dot-separated decimal numbers.
std::optional<int> compare_versions(std::string_view a, std::string_view b);

/// Whether version `have` is at least `min` ("" asks nothing: true); false where `have` is
/// unknown ("") or either is not a version.
bool version_at_least(std::string_view have, std::string_view min);

}  // namespace berth::broker
