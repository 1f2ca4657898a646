// Where Berth's helper programs (berth-squashfs, berth-slurm-client) are found: relative to the
// binary that runs them, so that a build tree, a flat copy and an install under any prefix all
// work. Header-only: the Slurm plugin, which links no Berth library, uses it too.
#pragma once

#include <string>
#include <string_view>
#include <vector>

// The install's helper folder relative to its bin/ (CMakeLists.txt sets it from
// GNUInstallDirs: libexec/berth beside bin/ gives "../libexec/berth").
#ifndef BERTH_HELPER_DIR
#define BERTH_HELPER_DIR "../libexec/berth"
#endif

namespace berth {

/// The install's helper folder, relative to the folder of `berth`.
inline constexpr std::string_view kHelperDirFromBin = BERTH_HELPER_DIR;

/// Where helper `name` of the binary in folder `bin_dir` may be, first found wins: beside the
/// binary (the build tree, a flat copy), then the install's helper folder.
inline std::vector<std::string> helper_candidates(std::string_view bin_dir, std::string_view name) {
  std::string dir(bin_dir);
  if (!dir.empty() && dir.back() != '/') dir += '/';
  return {dir + std::string(name), dir + std::string(kHelperDirFromBin) + "/" + std::string(name)};
}

}  // namespace berth
