// Dotted version numbers ("550.54.15", "12.4") as the NVIDIA driver and CUDA
// use them, compared component by component (missing components count as 0).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace berth {

struct Version {
  std::vector<int> parts;  ///< {550, 54, 15}; empty means unknown
  std::string text;        ///< as written ("535.104.05": leading zeros matter in file names)

  bool known() const { return !parts.empty(); }
  /// The text as parsed, else the parts joined by dots; "unknown" when empty.
  std::string str() const;
  /// The first component, 0 when unknown.
  int major() const { return parts.empty() ? 0 : parts[0]; }
};

/// Parses "550.54.15" or "12.4"; nullopt unless it is digits separated by single dots.
std::optional<Version> parse_version(std::string_view s);
/// -1, 0, 1 like strcmp; "12.4" == "12.4.0".
int compare_versions(const Version& a, const Version& b);
/// Whether version `have` is at least `min` ("" asks nothing: true); false where `have` is
/// unknown ("") or either is not a version. A minimum is a minimum: "12.4" passes "12.2"
/// (INDIGO's orchestrator compared cuda_min_version for equality).
bool version_at_least(std::string_view have, std::string_view min);
/// The CUDA version from cuDriverGetVersion's integer (12040 -> 12.4).
Version cuda_version_from_int(int v);
/// The CUDA version a driver of this branch supports, from NVIDIA's table of toolkit and
/// minimum driver versions (550.54.15 -> 12.4); unknown for drivers older than CUDA 10.0's.
/// A driver newer than the table's last branch gets that branch's version (a lower bound).
Version cuda_version_for_driver(const Version& driver);

}  // namespace berth
